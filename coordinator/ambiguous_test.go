package coordinator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestAmbiguousClaimIsCleanedUp: the claim txn reaches etcd and commits, but
// its answer is lost and the caller's ctx runs out. The caller gets an error;
// the seat it does not know about must not survive: the background cleanup
// fences the attempt, finds the seat and releases it once etcd answers again,
// while the session is still alive.
func TestAmbiguousClaimIsCleanedUp(t *testing.T) {
	cl := etcdtest.Start(t)
	direct := cl.Client(t)
	proxy := etcdtest.NewProxy(t, cl.Endpoint(0))
	cli := newClient(t, proxy.URL())
	c := testkit.Coordinator(t, cli, coordinator.WithCleanupTimeout(time.Second))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	s := testkit.Session(t, cli, 30*time.Second)
	warm, err := c.Claim(ctx, s, "p") // warm the connection and the pool cache
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	obs, err := coordinator.New(direct)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()

	proxy.DropResponses()
	defer proxy.Restore()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	claim, err := c.Claim(cctx, s, "p")
	cancel()
	if err == nil {
		t.Fatalf("claim succeeded with seat %d although no answer came back", claim.Seat())
	}
	st, err := obs.PoolStatus(ctx, "p")
	if err != nil || st.Held != 1 {
		t.Fatalf("the lost attempt should have committed in etcd: held %d (%v)", st.Held, err)
	}
	proxy.Restore()
	testkit.Eventually(t, 20*time.Second, "the orphaned seat to be released", func() bool {
		st, err := obs.PoolStatus(ctx, "p")
		return err == nil && st.Held == 0
	})
	if s.Err() != nil {
		t.Fatalf("session died; the cleanup must not depend on lease expiry: %v", s.Err())
	}
	// The session can claim again.
	if _, err := c.Claim(ctx, s, "p"); err != nil && !errors.Is(err, coordinator.ErrNoSeat) {
		t.Fatalf("claim after recovery: %v", err)
	}
}

// TestAmbiguousEnqueueIsCleanedUp: a waiter's enqueue txn commits but its
// answer is lost, and the caller gives up. Its queue key stands in line
// with nobody behind it to serve it; were it left, it would hold the line
// for as long as the session lives. The background cleanup must remove it
// once etcd answers again, though only the fence-and-read tells it the
// key's revision.
func TestAmbiguousEnqueueIsCleanedUp(t *testing.T) {
	cl := etcdtest.Start(t)
	proxy := etcdtest.NewProxy(t, cl.Endpoint(0))
	cli := newClient(t, proxy.URL())
	c := testkit.Coordinator(t, cli, coordinator.WithCleanupTimeout(time.Second))
	obs := testkit.Coordinator(t, cl.Client(t))
	ctx := testkit.Ctx(t, 60*time.Second)
	holder, first := holderAndWaiter(t, ctx, c, obs, cli)
	s := testkit.Session(t, cli, 30*time.Second)

	proxy.DropResponses() // the second waiter's enqueue commits; its answer is lost
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	_, err := c.Claim(cctx, s, "p", coordinator.WithWait())
	cancel()
	if err == nil {
		t.Fatal("a waiting claim returned a seat although no answer came back")
	}
	waitQueued(t, obs, "p", 2)
	proxy.Restore()
	waitQueued(t, obs, "p", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if cl := <-first; cl == nil {
		t.Fatal("the first waiter was not served")
	}
}
