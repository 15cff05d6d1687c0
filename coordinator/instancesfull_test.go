package coordinator_test

import (
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestFullInstancesKeepArrivalOrder: while every instance is full, a
// waiter with a tenant (and no instance selector) waits in line like any
// other, in arrival order: full instances bar every claim without a
// selector alike, so they are not its own constraint. It was held back off
// the line instead, and a waiter without a tenant that arrived later was
// granted the next instance seat first. (A waiter with a selector is still
// held back: see ownRoom.)
func TestFullInstancesKeepArrivalOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  coordinator.ClaimOption
	}{
		{"tenant", coordinator.WithTenant("a")},
		{"unlimited tenant", coordinator.WithTenant("b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cli := newCoord(t)
			ctx := testkit.Ctx(t, 60*time.Second)
			testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4, TenantLimits: map[string]int{"a": 2}})
			agent := testkit.Session(t, cli, 30*time.Second)
			if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Seats: 1, Labels: map[string]string{"zone": "x"}}); err != nil {
				t.Fatal(err)
			}
			held := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("h"))
			first := waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("first"), tc.opt)
			waitQueued(t, c, "p", 1) // in line, or (before the fix) held back
			later := waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("later"))
			waitQueued(t, c, "p", 2)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-first:
				if err != nil {
					t.Fatalf("first waiter: %v", err)
				}
			case err := <-later:
				t.Fatalf("the later waiter without a tenant was granted the instance seat (err %v) before the first", err)
			case <-time.After(10 * time.Second):
				q, _ := c.Queue(ctx, "p")
				t.Fatalf("nobody granted within 10s of the release; queue %+v", q)
			}
		})
	}
}
