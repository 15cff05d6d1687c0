package coordinator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestSelectorHeadStepsOutOfUnboundPool: a waiter that asks for labels and
// reaches the head of the line after the pool's last instance went does
// not hold up the line: no instance matches it, which is its own
// constraint (it steps out), while claims without labels take the
// anonymous seats now free. It was reported as "every instance is full",
// so it stayed at the head and the pool's seats sat idle while the waiter
// behind it waited.
func TestSelectorHeadStepsOutOfUnboundPool(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	agent := testkit.Session(t, cli, 30*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Seats: 3, Labels: map[string]string{"zone": "x"}}); err != nil {
		t.Fatal(err)
	}
	held := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("h"))
	labeled := waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithLabels(map[string]string{"zone": "x"}))
	waitQueued(t, c, "p", 1)
	plain := waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("plain"))
	waitQueued(t, c, "p", 2)
	if err := c.DeregisterInstance(ctx, "p", "i1"); err != nil {
		t.Fatal(err)
	}
	<-held.Done() // its instance went: the holder gives the seat back
	if err := held.Release(ctx); err != nil {
		t.Fatalf("release after the instance went: %v", err)
	}
	select {
	case err := <-plain:
		if err != nil {
			t.Fatalf("plain waiter: %v", err)
		}
	case err := <-labeled:
		t.Fatalf("labeled waiter ended (%v) with no instance to bind to", err)
	case <-time.After(10 * time.Second):
		q, _ := c.Queue(ctx, "p")
		t.Fatalf("the waiter without labels was not granted within 10s of the seat freeing; queue %+v", q)
	}
}

// TestHeldBackSelectorWaitersStayQuiet: waiters held back by their
// instance selector while every instance is full do not rewrite their
// waiting records when an instance they do not select frees a seat and a
// waiter without a selector takes it: their reason is their selector
// either way. (It read instances_full while every instance was full and
// no_matching_instance while another had a seat free, so each such flip
// cost every held-back waiter two record writes: 12 for 6 waiters.)
func TestHeldBackSelectorWaitersStayQuiet(t *testing.T) {
	const waiters = 6
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 10})
	agent := testkit.Session(t, cli, 30*time.Second)
	for _, in := range []coordinator.Instance{{ID: "x", Seats: 1, Labels: map[string]string{"zone": "x"}}, {ID: "y", Seats: 1, Labels: map[string]string{"zone": "y"}}} {
		if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), in); err != nil {
			t.Fatal(err)
		}
	}
	zoneX := coordinator.WithLabels(map[string]string{"zone": "x"})
	mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", zoneX)
	onY := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithLabels(map[string]string{"zone": "y"}))
	for i := range waiters {
		waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p", zoneX)
		waitQueued(t, c, "p", i+1)
	}
	plain := waitingClaim(ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	waitQueued(t, c, "p", waiters+1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := cli.Watch(wctx, "/test/"+t.Name()+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	<-watch
	if _, err := c.ForceRelease(ctx, "p", onY.Seat(), onY.Token(), "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-plain:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter without a selector was not granted y's seat within 10s")
	}
	if q, err := c.Queue(ctx, "p"); err != nil || len(q) != waiters {
		t.Fatalf("queue %+v, %v: want the %d held-back waiters", q, err, waiters)
	}
	// Not a synchronisation: the window in which the rewrites show. Each
	// held-back waiter's feed saw both changes before the grant returned,
	// and a rewrite follows within a round trip.
	time.Sleep(300 * time.Millisecond)
	put, err := cli.Put(ctx, "/test/"+t.Name()+"/marker", "")
	if err != nil {
		t.Fatal(err)
	}
	writes, marked := 0, false
	for wr := range watch {
		for _, ev := range wr.Events {
			if strings.Contains(string(ev.Kv.Key), "/waiting/") {
				writes++
			}
			marked = marked || ev.Kv.ModRevision == put.Header.Revision
		}
		if marked {
			break
		}
	}
	if writes > 0 {
		t.Fatalf("%d waiting-record writes by %d waiters held back by their selector when another instance's seat freed and was taken; want 0", writes, waiters)
	}
}
