package coordinator_test

import (
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestUnleasedQueueKeyDoesNotBlock: a key under queue/ without a lease
// (written by hand or by a hostile client) is not a waiter: it would never
// go away. Fresh claims and waiters are served around it, and the FIFO of
// real waiters holds.
func TestUnleasedQueueKeyDoesNotBlock(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	// Keys before, between and after where waiters' keys fall.
	for _, name := range []string{"0000000000000000-0000000000000000", "8000000000000000-0000000000000000", "ffffffffffffffff-ffffffffffffffff"} {
		if _, err := cli.Put(ctx, c.Prefix()+"/pools/p/queue/"+name, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	s := testkit.Session(t, cli, 10*time.Second)
	first := mustClaim(t, ctx, c, s, "p") // a fresh claim is not blocked
	got := make(chan *coordinator.Claim, 1)
	go func() {
		cl, err := c.Claim(ctx, testkit.Session(t, cli, 10*time.Second), "p", coordinator.WithWait())
		if err != nil {
			t.Error(err)
		}
		got <- cl
	}()
	waitQueued(t, c, "p", 1) // the unleased keys are not waiters
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case cl := <-got:
		if cl == nil {
			t.Fatal("waiter not granted")
		}
	case <-ctx.Done():
		t.Fatal("a waiter behind unleased queue keys was never granted")
	}
}
