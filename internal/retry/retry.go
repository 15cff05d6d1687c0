// Package retry is the one backoff policy of etcdpool's retry loops. It
// wraps github.com/cenkalti/backoff/v5: delays start at a policy's
// Initial, double after each failed try up to its Max, and are jittered by
// ±50%, so that processes that failed together (agents restarted at once,
// claimants cut off by one leader election) do not retry in step.
//
// Each loop names its Policy with the reason for its numbers next to it.
package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Policy is how one retry loop backs off.
type Policy struct {
	// Initial is the delay before the second try (±50%).
	Initial time.Duration
	// Max caps the delay's midpoint; a single delay is at most 1.5×Max.
	Max time.Duration
	// Tries bounds the calls Do makes; 0 means no bound (ctx bounds it).
	Tries uint
}

// Backoff returns a fresh sequence of p's delays, for loops that wait on
// their own timer and call NextBackOff and Reset themselves.
func (p Policy) Backoff() *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         p.Max,
	}
	b.Reset()
	return b
}

// Permanent marks err as one that retrying cannot fix: Do returns err
// (unwrapped) at once.
func Permanent(err error) error { return backoff.Permanent(err) }

// Do calls f until it returns nil or a Permanent error, p.Tries calls have
// failed, or ctx ends, waiting p's delays between calls. notify, if not
// nil, is called before each wait with the error that will be retried and
// the delay. When ctx ends first, the error wraps both ctx's error and the
// last error of f, so errors.Is matches either.
func Do(ctx context.Context, p Policy, f func() error, notify func(err error, next time.Duration)) error {
	var last error
	opts := []backoff.RetryOption{
		backoff.WithBackOff(p.Backoff()),
		backoff.WithMaxElapsedTime(0),
		backoff.WithMaxTries(p.Tries),
	}
	if notify != nil {
		opts = append(opts, backoff.WithNotify(notify))
	}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		last = f()
		return struct{}{}, last
	}, opts...)
	if err != nil && last != nil && !errors.Is(last, err) && errors.Is(err, context.Cause(ctx)) {
		return fmt.Errorf("%w (last error: %w)", err, last)
	}
	return err
}

// Sleep waits d or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
