package coordinator_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestInstanceLoads reads the lease and bound seats of instances: one
// whose name prefixes another's (i1, i10), one deregistered with a seat
// still bound to it, and more instances than one txn reads.
func TestInstanceLoads(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 8})
	a, b := testkit.Session(t, cli, 10*time.Second), testkit.Session(t, cli, 10*time.Second)
	holder := testkit.Session(t, cli, 10*time.Second)
	for _, r := range []struct {
		id    string
		lease clientv3.LeaseID
		seats int
	}{{"i1", a.Lease(), 3}, {"i10", b.Lease(), 1}, {"i2", a.Lease(), 1}} {
		if _, err := c.RegisterInstance(ctx, "p", r.lease, coordinator.Instance{ID: r.id, Seats: r.seats}); err != nil {
			t.Fatal(err)
		}
	}
	i1 := []*coordinator.Claim{
		mustClaim(t, ctx, c, holder, "p", coordinator.WithInstance("i1")),
		mustClaim(t, ctx, c, holder, "p", coordinator.WithInstance("i1")),
	}
	mustClaim(t, ctx, c, holder, "p", coordinator.WithInstance("i10"))
	mustClaim(t, ctx, c, holder, "p", coordinator.WithInstance("i2"))
	if err := c.DeregisterInstance(ctx, "p", "i2"); err != nil {
		t.Fatal(err)
	}
	if err := i1[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	ids := []string{"i1", "i10", "i2"}
	for i := range 40 { // past one txn's share
		ids = append(ids, fmt.Sprintf("x%d", i))
	}
	got, err := c.InstanceLoads(ctx, "p", ids...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]coordinator.InstanceLoad{
		"i1":  {Lease: a.Lease(), Bound: 1},
		"i10": {Lease: b.Lease(), Bound: 1},
		"i2":  {Bound: 1},
	}
	for _, id := range ids {
		if got[id] != want[id] {
			t.Errorf("%s: %+v, want %+v", id, got[id], want[id])
		}
	}
	if len(got) != len(ids) {
		t.Errorf("%d loads for %d instances", len(got), len(ids))
	}

	if _, err := c.InstanceLoads(ctx, "nope", "i1"); !errors.Is(err, coordinator.ErrPoolNotFound) {
		t.Errorf("a pool that does not exist: %v, want ErrPoolNotFound", err)
	}
	if _, err := c.InstanceLoads(ctx, "nope"); !errors.Is(err, coordinator.ErrPoolNotFound) {
		t.Errorf("no instances, a pool that does not exist: %v, want ErrPoolNotFound", err)
	}
	if _, err := c.InstanceLoads(ctx, "p", "bad/id"); !errors.Is(err, coordinator.ErrInvalid) {
		t.Errorf("a bad instance id: %v, want ErrInvalid", err)
	}
}

// TestInstanceLoadsOnLowMaxTxnOps: on an etcd whose --max-txn-ops is 16,
// InstanceLoads reads 40 instances all the same, fewer per txn, and only
// its first call pays for refused txns. Found by a review (2026-12-05):
// every call failed, and a draining agent waited its whole timeout.
func TestInstanceLoadsOnLowMaxTxnOps(t *testing.T) {
	cli, refused := tooManyOpsClient(t, etcdtest.StartMaxTxnOps(t, 16))
	c := testkit.Coordinator(t, cli)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	lease := testkit.Session(t, cli, 30*time.Second).Lease()
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("x%d", i)
		if _, err := c.RegisterInstance(ctx, "p", lease, coordinator.Instance{ID: id}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithInstance("x39"))
	for call := range 2 {
		before := refused.Load()
		got, err := c.InstanceLoads(ctx, "p", ids...)
		if err != nil {
			t.Fatalf("call %d: %v", call, err)
		}
		for i, id := range ids {
			want := coordinator.InstanceLoad{Lease: lease, Bound: 0}
			if i == 39 {
				want.Bound = 1
			}
			if got[id] != want {
				t.Errorf("call %d: %s: %+v, want %+v", call, id, got[id], want)
			}
		}
		if n := refused.Load() - before; (call == 0 && n > 3) || (call == 1 && n != 0) {
			t.Errorf("call %d: %d txns refused as too many operations", call, n)
		}
	}
}
