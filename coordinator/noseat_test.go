package coordinator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestNoSeatSaysWhy: a refused claim carries a typed reason, and the
// message says it in words without internal markers.
func TestNoSeatSaysWhy(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2, TenantLimit: 1})
	mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p", coordinator.WithTenant("acme"))
	cases := []struct {
		name string
		opts []coordinator.ClaimOption
		want coordinator.WaitReason
		text string
	}{
		{"tenant at its limit", []coordinator.ClaimOption{coordinator.WithTenant("acme")}, coordinator.WaitTenantLimit, `tenant "acme" holds 1 of its limit 1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Claim(ctx, testkit.Session(t, cli, 10*time.Second), "p", tc.opts...)
			var ns *coordinator.NoSeatError
			if !errors.As(err, &ns) || !errors.Is(err, coordinator.ErrNoSeat) || ns.Reason != tc.want {
				t.Fatalf("got %v, want a NoSeatError with reason %s", err, tc.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.text) || strings.Contains(msg, "own limit") {
				t.Fatalf("message %q: want %q and no internal marker", msg, tc.text)
			}
		})
	}
	mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p")
	_, err := c.Claim(ctx, testkit.Session(t, cli, 10*time.Second), "p")
	var ns *coordinator.NoSeatError
	if !errors.As(err, &ns) || ns.Reason != coordinator.WaitPoolFull || ns.Own() {
		t.Fatalf("full pool: got %v, want WaitPoolFull", err)
	}
}
