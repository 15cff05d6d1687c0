package coordinator_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

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

// TestLateEnqueueAfterPoolRecreated: an enqueue txn is lost before etcd
// sees it and lands seconds later, after the waiter gave up and its pool
// was deleted and created again. The deletion took the waiter's fence key
// with it, so the fence compare alone passed again: the new, empty pool
// got a queue entry of a live session that nobody served, and every fresh
// claim was refused ("claimants waiting") until that session ended. The
// enqueue now compares the pool's creation too. Found by a review
// (2026-12-05).
func TestLateEnqueueAfterPoolRecreated(t *testing.T) {
	var armed atomic.Bool
	var mu sync.Mutex
	var late func() (*pb.TxnResponse, error)
	hold := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.TxnRequest); ok && putsUnder(r, "/queue/") && armed.CompareAndSwap(true, false) {
			mu.Lock()
			late = func() (*pb.TxnResponse, error) {
				out := new(pb.TxnResponse)
				return out, invoker(context.Background(), method, req, out, cc, opts...)
			}
			mu.Unlock()
			return context.DeadlineExceeded // not sent: it lands later
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, raw := newObservedClient(t, shared.Endpoint(), hold), newClient(t)
	prefix := uniquePrefix(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	obs := testkit.Coordinator(t, raw, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, obs, "p", coordinator.PoolSpec{Capacity: 1})
	holder := mustClaim(t, ctx, obs, testkit.Session(t, raw, 30*time.Second), "p")
	armed.Store(true)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := c.Claim(wctx, testkit.Session(t, cli, 60*time.Second), "p", coordinator.WithWait())
	cancel()
	if err == nil || armed.Load() {
		t.Fatalf("the waiting claim: %v (enqueue held: %v); want it to give up with its first enqueue lost", err, !armed.Load())
	}
	waitQueued(t, obs, "p", 0)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := obs.DeletePool(ctx, "p", false); err != nil {
		t.Fatal(err)
	}
	testkit.CreatePool(t, obs, "p", coordinator.PoolSpec{Capacity: 1})
	mu.Lock()
	resp, err := late()
	mu.Unlock()
	if err == nil && resp.Succeeded {
		t.Errorf("the enqueue lost before the pool's deletion applied in the new pool")
	}
	fresh := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(prefix))
	if _, err := fresh.Claim(ctx, testkit.Session(t, raw, 30*time.Second), "p"); err != nil {
		t.Errorf("a fresh claim on the new, empty pool: %v", err)
	}
}

// TestWaitOnViewNotLoadedIsNoDeletion: a wait that starts on a view of the
// pool not loaded yet (forgotten meanwhile) must read the pool, not take
// the missing spec for the pool's deletion. Found by a review of
// 264d1d2 (2026-12-05): such a wait failed at once with ErrPoolDeleted.
func TestWaitOnViewNotLoadedIsNoDeletion(t *testing.T) {
	c, cli := newCoord(t)
	other := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(c.Prefix()))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	holder := mustClaim(t, ctx, other, testkit.Session(t, cli, 30*time.Second), "p")
	got := make(chan error, 1)
	go func() {
		cl, err := coordinator.WaitAfterForget(ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
		if err == nil {
			err = cl.Release(ctx)
		}
		got <- err
	}()
	waitQueued(t, other, "p", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("the wait: %v; want the seat", err)
	}
}

// TestBorrowedWaiterReturnsAsSessionEnds: a claim waits on a borrowed
// session through a proxy that then drops everything. The session ends at
// its local deadline; the claim must return then, and leave the removal of
// its queue key (the owner keeps the lease alive) to the background.
// Found by a review of 7a79e1c (2026-12-05): the claim first tried the
// removal itself and returned 5 s (the cleanup timeout) after the end.
func TestBorrowedWaiterReturnsAsSessionEnds(t *testing.T) {
	direct := newClient(t)
	px := etcdtest.NewProxy(t, shared.Endpoint())
	prefix := uniquePrefix(t)
	c := testkit.Coordinator(t, newClient(t, px.URL()), coordinator.WithPrefix(prefix))
	obs := testkit.Coordinator(t, direct, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, obs, "p", coordinator.PoolSpec{Capacity: 1})
	mustClaim(t, ctx, obs, testkit.Session(t, direct, 30*time.Second), "p")
	owner := testkit.Session(t, direct, 3*time.Second) // kept alive directly
	bs, err := coordinator.BorrowSession(ctx, c.Client(), owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := c.Claim(ctx, bs, "p", coordinator.WithWait())
		got <- err
	}()
	waitQueued(t, obs, "p", 1)
	px.Blackhole()
	<-bs.Done()
	select {
	case err := <-got:
		if !errors.Is(err, coordinator.ErrSessionExpired) {
			t.Errorf("the wait: %v; want ErrSessionExpired", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the wait did not return within 1 s of its session's end")
	}
	px.Restore()
	waitQueued(t, obs, "p", 0) // removed in the background once etcd answers
}
