package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestWatchEventsInOrder(t *testing.T) {
	cl := etcdtest.Start(t)
	cli := cl.Client(t)
	c := testkit.Coordinator(t, cli)
	ctx := testkit.Ctx(t, 30*time.Second)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := c.Watch(wctx, "")
	next := func() coordinator.Event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-ctx.Done():
			t.Fatal("no event")
			return coordinator.Event{}
		}
	}
	expect := func(typ coordinator.EventType, check func(coordinator.Event) bool) {
		t.Helper()
		ev := next()
		if ev.Type != typ || (check != nil && !check(ev)) {
			t.Fatalf("got %+v, want %s", ev, typ)
		}
	}
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	expect(coordinator.EventPoolCreated, func(e coordinator.Event) bool { return e.Pool == "p" })
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Seats: 2}); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventInstanceUp, func(e coordinator.Event) bool { return e.Instance == "i1" })
	s := testkit.Session(t, cli, 10*time.Second)
	a := mustClaim(t, ctx, c, s, "p", coordinator.WithHolder("alice"), coordinator.WithTenant("t"))
	expect(coordinator.EventSeatClaimed, func(e coordinator.Event) bool {
		return e.Holder == "alice" && e.Token == a.Token() && e.Seat == a.Seat() && e.Instance == "i1" && e.Tenant == "t"
	})
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventSeatReleased, func(e coordinator.Event) bool { return e.Token == a.Token() })
	b := mustClaim(t, ctx, c, s, "p", coordinator.WithHolder("bob"))
	expect(coordinator.EventSeatClaimed, nil)
	if _, err := c.ForceRelease(ctx, "p", b.Seat(), b.Token(), "maintenance"); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventSeatForceReleased, func(e coordinator.Event) bool { return e.Reason == "maintenance" && e.Holder == "bob" })
	short := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.Claim(ctx, short, "p"); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventSeatClaimed, nil)
	etcdtest.Revoke(t, cli, short.Lease())
	expect(coordinator.EventSeatExpired, nil)
	if _, err := c.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventInstanceDraining, nil)
	if _, err := c.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 3}, 0); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventSpecChanged, nil)
	if err := c.DeregisterInstance(ctx, "p", "i1"); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventInstanceDown, nil)

	// Compaction: the stream survives and goes on.
	etcdtest.Compact(t, cli)
	if err := c.DeletePool(ctx, "p", false); err != nil {
		t.Fatal(err)
	}
	expect(coordinator.EventPoolDeleted, nil)
}

func TestWatchSurvivesCompactionAndRestart(t *testing.T) {
	cl := etcdtest.Start(t)
	cli := cl.Client(t)
	c := testkit.Coordinator(t, cli)
	ctx := testkit.Ctx(t, 60*time.Second)
	events := c.Watch(ctx, "p")
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	if ev := <-events; ev.Type != coordinator.EventPoolCreated {
		t.Fatalf("first event %+v", ev)
	}
	cl.Stop(0) // the watch breaks
	cl.Restart(t, 0)
	etcdtest.Compact(t, cli)
	if _, err := c.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 3}, 0); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-events:
			if ev.Type == coordinator.EventSpecChanged {
				return
			}
			if ev.Type != coordinator.EventResync {
				t.Fatalf("unexpected %+v", ev)
			}
		case <-ctx.Done():
			t.Fatal("no spec-changed event after restart and compaction")
		}
	}
}

// TestWatchFromTypesReleaseAtCompactRevision: WatchFrom resumes at the
// compact revision C after a resync, where etcd delivers a delete without
// its previous value. A force-release at C must still read as one, with
// its token, from the release record of the same revision. Found by a
// review (2026-12-04): it read seat-expired, token 0.
func TestWatchFromTypesReleaseAtCompactRevision(t *testing.T) {
	ec := etcdtest.Start(t)
	cli := ec.Client(t)
	c := testkit.Coordinator(t, cli)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	before, err := cli.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	a := mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p", coordinator.WithHolder("alice"))
	if _, err := c.ForceRelease(ctx, "p", a.Seat(), a.Token(), "stuck job"); err != nil {
		t.Fatal(err)
	}
	compacted := etcdtest.Compact(t, cli)
	events := c.WatchFrom(ctx, "p", before.Header.Revision)
	if ev := nextEvent(t, events); ev.Type != coordinator.EventResync || ev.Revision != compacted {
		t.Fatalf("first event %+v; want a resync at %d", ev, compacted)
	}
	if ev := nextEvent(t, events); ev.Revision != compacted || ev.Type != coordinator.EventSeatForceReleased || ev.Token != a.Token() {
		t.Fatalf("event at the compact revision %d: %+v; want seat-force-released of token %d", compacted, ev, a.Token())
	}
}
