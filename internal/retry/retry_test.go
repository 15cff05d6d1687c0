package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errTry = errors.New("transient")

func TestDo(t *testing.T) {
	fast := Policy{Initial: time.Millisecond, Max: 4 * time.Millisecond}
	for _, tc := range []struct {
		name      string
		p         Policy
		failFirst int   // calls that fail with errTry before success
		final     error // returned after failFirst, nil for success
		calls     int
		want      error
	}{
		{name: "first try", p: fast, calls: 1},
		{name: "after failures", p: fast, failFirst: 3, calls: 4},
		{name: "permanent", p: fast, failFirst: 2, final: Permanent(errBad), calls: 3, want: errBad},
		{name: "tries bound", p: Policy{Initial: time.Millisecond, Max: time.Millisecond, Tries: 3}, failFirst: 100, calls: 3, want: errTry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, notified := 0, 0
			err := Do(context.Background(), tc.p, func() error {
				calls++
				if calls <= tc.failFirst {
					return errTry
				}
				return tc.final
			}, func(error, time.Duration) { notified++ })
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if calls != tc.calls || notified != min(tc.calls-1, tc.failFirst) {
				t.Fatalf("calls = %d, notified = %d; want %d calls", calls, notified, tc.calls)
			}
		})
	}
}

var errBad = errors.New("bad input")

// TestDoContextEnds: the error names both the context and the last failure.
func TestDoContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Do(ctx, Policy{Initial: 5 * time.Millisecond, Max: 10 * time.Millisecond}, func() error { return errTry }, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errTry) {
		t.Fatalf("err = %v, want the deadline and the last error", err)
	}
}

// TestBackoffBounds: delays stay within ±50% of a midpoint that doubles up
// to Max, and Reset starts over.
func TestBackoffBounds(t *testing.T) {
	p := Policy{Initial: 100 * time.Millisecond, Max: 400 * time.Millisecond}
	b := p.Backoff()
	for round := 0; round < 2; round++ {
		mid := p.Initial
		for i := 0; i < 6; i++ {
			d := b.NextBackOff()
			if d < mid/2 || d > mid*3/2+1 {
				t.Fatalf("round %d try %d: delay %v outside %v..%v", round, i, d, mid/2, mid*3/2)
			}
			mid = min(2*mid, p.Max)
		}
		b.Reset()
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep without cancel reported false")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended context reported true")
	}
}
