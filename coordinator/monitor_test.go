package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// The monitor of a claim whose holder watches Done sees the seat key
// deleted by the holder's own release. These tests hold the release's
// reply until the monitor has handled that delete, so the order that
// matters is certain rather than likely: the monitor either logs that it
// leaves the reason to the release (seatGone), or sends an RPC to ask
// etcd, which the interceptor sees.

// heldRelease is a Coordinator whose client counts its unary calls and,
// once armed, holds the reply of the next release txn until the monitor
// has handled the delete. then, if set, ends the held call instead of
// returning the reply at once.
type heldRelease struct {
	c       *coordinator.Coordinator
	cli     *clientv3.Client
	calls   atomic.Int64
	armed   atomic.Bool
	holding atomic.Bool
	handled chan struct{} // the monitor logged, or sent an RPC while a reply was held
	then    func(ctx context.Context, err error) error
}

func newHeldRelease(t *testing.T, prefix string) *heldRelease {
	t.Helper()
	h := &heldRelease{handled: make(chan struct{}, 1)}
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		h.calls.Add(1)
		r, ok := req.(*pb.TxnRequest)
		release := ok && deletesUnder(r, "/seats/")
		if !release && h.holding.Load() {
			notify(h.handled) // the monitor asked etcd
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if release && h.armed.CompareAndSwap(true, false) {
			h.holding.Store(true)
			defer h.holding.Store(false)
			select {
			case <-h.handled:
			case <-ctx.Done():
				return ctx.Err()
			}
			if h.then != nil {
				return h.then(ctx, err)
			}
		}
		return err
	}
	h.cli = newObservedClient(t, shared.Endpoint(), ic)
	var err error
	h.c, err = coordinator.New(h.cli, coordinator.WithPrefix(fmt.Sprintf("%s/%d", prefix, time.Now().UnixNano())),
		coordinator.WithLogger(signalLogger("the release gives the reason", h.handled)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.c.Close)
	return h
}

// notify sends on ch without blocking.
func notify(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// claim takes the seat of a pool of one, once the pool feed has synced
// (its read is an RPC too), and watches Done.
func (h *heldRelease) claim(t *testing.T, ctx context.Context) (*coordinator.Claim, <-chan struct{}) {
	t.Helper()
	testkit.CreatePool(t, h.c, "p", coordinator.PoolSpec{Capacity: 1})
	cl := mustClaim(t, ctx, h.c, testkit.Session(t, h.cli, 30*time.Second), "p")
	testkit.Eventually(t, 10*time.Second, "the pool feed to sync", func() bool { return coordinator.FeedSynced(h.c, "p") })
	return cl, cl.Done()
}

// TestWatchedReleaseIsOneRoundTrip: a holder that watches Done (the
// documented pattern) releases in one RPC, like one that does not. Its
// monitor must not ask etcd why the seat went: the release knows.
func TestWatchedReleaseIsOneRoundTrip(t *testing.T) {
	h := newHeldRelease(t, "/watchedrelease")
	ctx := testkit.Ctx(t, 30*time.Second)
	cl, done := h.claim(t, ctx)
	before := h.calls.Load()
	h.armed.Store(true)
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if n := h.calls.Load() - before; n != 1 {
		t.Fatalf("a watched release took %d RPCs; want 1", n)
	}
	if err := cl.Err(); !errors.Is(err, coordinator.ErrReleased) {
		t.Fatalf("Err() = %v, want ErrReleased", err)
	}
}

// TestReleaseGivenUpLeavesReasonToMonitor: a release whose reply never
// comes gives up when its ctx ends, without ending the claim, although
// its txn committed. The monitor, which saw the delete and waited for the
// release, must then ask etcd, and find the release record.
func TestReleaseGivenUpLeavesReasonToMonitor(t *testing.T) {
	h := newHeldRelease(t, "/releasegivenup")
	h.then = func(ctx context.Context, _ error) error { <-ctx.Done(); return ctx.Err() } // the reply is lost
	ctx := testkit.Ctx(t, 30*time.Second)
	cl, done := h.claim(t, ctx)
	h.armed.Store(true)
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := cl.Release(rctx); err == nil {
		t.Fatal("Release returned nil though every reply was lost")
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Done stayed open after the release gave up")
	}
	if err := cl.Err(); !errors.Is(err, coordinator.ErrReleased) {
		t.Fatalf("Err() = %v, want ErrReleased (the release record is ours)", err)
	}
}

// TestCloseDuringWatchedRelease: while the release's reply is held and the
// monitor waits for it, closing the Coordinator must close Done with
// ErrClosed at once, not when the release returns.
func TestCloseDuringWatchedRelease(t *testing.T) {
	h := newHeldRelease(t, "/closerelease")
	held, free := make(chan struct{}), make(chan struct{})
	h.then = func(_ context.Context, err error) error { close(held); <-free; return err }
	ctx := testkit.Ctx(t, 30*time.Second)
	cl, done := h.claim(t, ctx)
	h.armed.Store(true)
	released := make(chan error, 1)
	go func() { released <- cl.Release(ctx) }()
	<-held
	closed := make(chan struct{})
	go func() { h.c.Close(); close(closed) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		close(free)
		t.Fatal("Done stayed open after Close while the release's reply was held")
	}
	if err := cl.Err(); !errors.Is(err, coordinator.ErrClosed) {
		t.Errorf("Err() = %v, want ErrClosed", err)
	}
	close(free)
	<-closed
	if err := <-released; err != nil {
		t.Errorf("release: %v", err)
	}
}
