package coordinator_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
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
