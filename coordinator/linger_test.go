package coordinator_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestHolderFeedLingers: a claim in a small pool starts the process's
// pool feed (keepFeed); after the release the feed runs on for
// FeedLinger, so a claim made meanwhile reads nothing, and then it stops.
func TestHolderFeedLingers(t *testing.T) {
	cli, ranges := newCountingClient(t, "/etcdserverpb.KV/Range")
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(fmt.Sprintf("/linger/%d", time.Now().UnixNano())))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	s := testkit.Session(t, cli, 30*time.Second)

	cl := mustClaim(t, ctx, c, s, "p")
	if !coordinator.FeedRunning(c, "p") {
		t.Fatal("a claim in a pool of 4 seats started no feed")
	}
	testkit.Eventually(t, 10*time.Second, "the holder's feed to sync", func() bool { return coordinator.FeedSynced(c, "p") })
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	ranges.Store(0)
	again := mustClaim(t, ctx, c, s, "p")
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if time.Since(released) < coordinator.FeedLinger/2 {
		if n := ranges.Load(); n != 0 {
			t.Errorf("a claim while the feed lingered read the pool %d times; want 0", n)
		}
		if !coordinator.FeedSynced(c, "p") {
			t.Error("the feed stopped at once; want it to linger")
		}
	} else {
		t.Logf("claim and release took %v, too long to check the linger; only its end is checked", time.Since(released))
	}
	testkit.Eventually(t, coordinator.FeedLinger+10*time.Second, "the idle feed to stop", func() bool {
		return !coordinator.FeedRunning(c, "p")
	})
}

// TestCloseStopsLingeringFeed: Close does not wait out the linger of a
// feed nobody uses.
func TestCloseStopsLingeringFeed(t *testing.T) {
	cli := newClient(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(fmt.Sprintf("/lingerclose/%d", time.Now().UnixNano()))) // Close is idempotent
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !coordinator.FeedRunning(c, "p") {
		t.Fatal("no lingering feed to stop")
	}
	t0 := time.Now()
	c.Close()
	if d := time.Since(t0); d > coordinator.FeedLinger/2 {
		t.Errorf("Close took %v with a lingering feed; want it stopped at once", d)
	}
	if coordinator.FeedRunning(c, "p") {
		t.Error("the feed still runs after Close")
	}
}

// TestLargePoolHolderStartsNoFeed: a holder of a pool of more than
// MaxFedHolders seats does not follow the pool: every holder's feed would
// receive every change of the pool.
func TestLargePoolHolderStartsNoFeed(t *testing.T) {
	cli := newClient(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(fmt.Sprintf("/lingerlarge/%d", time.Now().UnixNano())))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: coordinator.MaxFedHolders + 1})
	mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	if coordinator.FeedRunning(c, "p") {
		t.Errorf("a claim in a pool of %d seats started a feed", coordinator.MaxFedHolders+1)
	}
}
