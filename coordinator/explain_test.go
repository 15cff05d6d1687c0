package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestExplain checks Explain's verdict and reasons against what Claim
// does on the same state: every case that Explain says is granted is then
// claimed without waiting, and every case it refuses is refused by Claim
// with the first of its reasons.
func TestExplain(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 3, TenantLimit: 1, TenantLimits: map[string]int{"x": 0}})
	agent := testkit.Session(t, cli, 10*time.Second)
	for id, zone := range map[string]string{"i1": "a", "i2": "b"} {
		if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: id, Seats: 2, Labels: map[string]string{"zone": zone}}); err != nil {
			t.Fatal(err)
		}
	}
	s := testkit.Session(t, cli, 10*time.Second)
	mustClaim(t, ctx, c, s, "p", coordinator.WithTenant("t"), coordinator.WithLabels(map[string]string{"zone": "a"}))
	mustClaim(t, ctx, c, s, "p", coordinator.WithLabels(map[string]string{"zone": "a"}))
	zone := func(z string) coordinator.ClaimOption { return coordinator.WithLabels(map[string]string{"zone": z}) }
	for _, tc := range []struct {
		name    string
		opts    []coordinator.ClaimOption
		granted bool
		never   bool
		reasons []coordinator.WaitReason
		detail  string // in the instances' reasons
	}{
		{"free seat", nil, true, false, nil, ""},
		{"tenant at limit", []coordinator.ClaimOption{coordinator.WithTenant("t")}, false, false, []coordinator.WaitReason{coordinator.WaitTenantLimit}, ""},
		{"tenant denied", []coordinator.ClaimOption{coordinator.WithTenant("x")}, false, true, []coordinator.WaitReason{coordinator.WaitTenantDenied}, ""},
		{"label on a full instance", []coordinator.ClaimOption{zone("a")}, false, false, []coordinator.WaitReason{coordinator.WaitNoMatchingInstance}, "full (2 of 2 seats held)"},
		{"label nobody has", []coordinator.ClaimOption{zone("c")}, false, false, []coordinator.WaitReason{coordinator.WaitNoMatchingInstance}, "label zone=b, not c"},
		{"unregistered instance", []coordinator.ClaimOption{coordinator.WithInstance("i9")}, false, false, []coordinator.WaitReason{coordinator.WaitNoMatchingInstance}, "not registered"},
		{"tenant and label", []coordinator.ClaimOption{coordinator.WithTenant("t"), zone("a")}, false, false, []coordinator.WaitReason{coordinator.WaitTenantLimit, coordinator.WaitNoMatchingInstance}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := c.Explain(ctx, "p", tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got []coordinator.WaitReason
			var why []string
			for _, b := range e.Blockers {
				got = append(got, b.Reason)
				if b.Detail == "" || b.Change == "" {
					t.Errorf("blocker %+v without detail or change", b)
				}
			}
			for _, f := range e.Instances {
				why = append(why, f.Why)
			}
			if e.Granted != tc.granted || e.Never != tc.never || !equalReasons(got, tc.reasons) || !strings.Contains(strings.Join(why, "|"), tc.detail) {
				t.Fatalf("explain: %+v; want granted %v, never %v, reasons %v, instance reason %q", e, tc.granted, tc.never, tc.reasons, tc.detail)
			}
			cl, err := c.Claim(ctx, s, "p", tc.opts...)
			if tc.granted {
				if err != nil {
					t.Fatalf("explained as granted, claim: %v", err)
				}
				_ = cl.Release(ctx)
				return
			}
			var ns *coordinator.NoSeatError
			first := e.Blockers[0].Reason
			if errors.As(err, &ns) && ns.Reason == first || first == coordinator.WaitNoMatchingInstance && errors.Is(err, coordinator.ErrInstanceNotFound) {
				return
			}
			t.Fatalf("explained as %s first, claim: %v", first, err)
		})
	}
	// Fill the pool: then a fresh claim is refused for capacity first, and
	// a waiter in line puts a queue blocker before it.
	mustClaim(t, ctx, c, s, "p", zone("b"))
	e, err := c.Explain(ctx, "p")
	if err != nil || e.Granted || !equalReasons(blockerReasons(e), []coordinator.WaitReason{coordinator.WaitPoolFull}) {
		t.Fatalf("full pool: %+v, %v", e, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Claim(wctx, s, "p", coordinator.WithWait())
	}()
	waitQueued(t, c, "p", 1)
	e, err = c.Explain(ctx, "p")
	cancel()
	<-done
	if err != nil || e.Granted || !equalReasons(blockerReasons(e), []coordinator.WaitReason{coordinator.WaitQueue, coordinator.WaitPoolFull}) {
		t.Fatalf("full pool with a waiter: %+v, %v", e, err)
	}
	if got := (coordinator.WaitStatus{Reason: e.Blockers[0].Reason, Detail: e.Blockers[0].Detail}).String(); got != `behind others in line: pool "p" has claimants waiting (1)` {
		t.Fatalf("queue blocker says %q", got)
	}
	if _, err := c.Explain(ctx, "nope"); !errors.Is(err, coordinator.ErrPoolNotFound) {
		t.Fatalf("missing pool: %v", err)
	}
}

func blockerReasons(e coordinator.Explanation) []coordinator.WaitReason {
	var out []coordinator.WaitReason
	for _, b := range e.Blockers {
		out = append(out, b.Reason)
	}
	return out
}

func equalReasons(a, b []coordinator.WaitReason) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
