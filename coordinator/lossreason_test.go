package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// The tests of why a claim ended: Err gives the true reason, and SeatLost
// counts only real losses. Each was found by a review (2026-12-04) and
// failed before its fix.

// lostCounts returns the SeatLost counts by reason.
func (m *countingMetrics) lostCounts() map[string]int64 {
	out := map[string]int64{}
	m.lost.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// blockingCalls returns an interceptor that, while block is set, holds
// every unary call of the kind of req (a *pb.TxnRequest or a
// *pb.RangeRequest) until its ctx ends, as an etcd that does not answer,
// and notifies entered of each.
func blockingCalls[R any](block *atomic.Bool, entered chan<- struct{}) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(R); ok && block.Load() {
			notify(entered)
			<-ctx.Done()
			return ctx.Err()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// closableCoord returns a Coordinator on cli that the test closes itself
// (closed again, harmlessly, when it ends), with metrics m.
func closableCoord(t *testing.T, cli *clientv3.Client, m *countingMetrics) *coordinator.Coordinator {
	t.Helper()
	c, err := coordinator.New(cli, coordinator.WithPrefix(uniquePrefix(t)), coordinator.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestPoolDeletedBoundClaimSaysSo: DeletePool with force deletes a bound
// claim's seat key and its instance's key in one txn. The claim's Err must
// say the pool was deleted, whichever of its watches the monitor reads
// first. Before the fix it said the instance was gone in 18 of 40 trials.
func TestPoolDeletedBoundClaimSaysSo(t *testing.T) {
	m := &countingMetrics{}
	c, cli := newCoord(t, coordinator.WithMetrics(m))
	ctx := testkit.Ctx(t, 60*time.Second)
	agent, s := testkit.Session(t, cli, 10*time.Second), testkit.Session(t, cli, 10*time.Second)
	const trials = 20
	wrong := 0
	for i := range trials {
		pool := fmt.Sprintf("p%d", i)
		testkit.CreatePool(t, c, pool, coordinator.PoolSpec{Capacity: 100}) // no feed (keepFeed)
		if _, err := c.RegisterInstance(ctx, pool, agent.Lease(), coordinator.Instance{ID: "i1", Addr: "10.0.0.1:80"}); err != nil {
			t.Fatal(err)
		}
		cl := mustClaim(t, ctx, c, s, pool)
		if _, ok := cl.Instance(); !ok {
			t.Fatal("the claim is not bound to the instance")
		}
		cl.Done() // the monitor watches from the grant's revision: it misses nothing
		if err := c.DeletePool(ctx, pool, true); err != nil {
			t.Fatal(err)
		}
		select {
		case <-cl.Done():
		case <-ctx.Done():
			t.Fatal("Done did not close")
		}
		if !errors.Is(cl.Err(), coordinator.ErrPoolDeleted) {
			t.Logf("trial %d: Err = %v", i, cl.Err())
			wrong++
		}
	}
	if wrong > 0 {
		t.Fatalf("pool deleted, but Err said otherwise in %d of %d trials; SeatLost %v", wrong, trials, m.lostCounts())
	}
}

// TestCloseWhileMonitorRereadsEndsClaim: the monitor's watch broke (its
// start revision compacted) and it re-reads the seat key while etcd does
// not answer; Coordinator.Close must end the claim with ErrClosed, as it
// does for every claim it watched. Before the fix Done stayed open, Err
// nil: nothing watched the seat any more.
func TestCloseWhileMonitorRereadsEndsClaim(t *testing.T) {
	var block atomic.Bool
	entered := make(chan struct{}, 1)
	cli := newObservedClient(t, shared.Endpoint(), blockingCalls[*pb.RangeRequest](&block, entered))
	c := closableCoord(t, cli, &countingMetrics{})
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100})
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p")
	other := newClient(t)
	resp, err := other.Put(ctx, "/"+t.Name()+"/bump", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	block.Store(true)
	cl.Done() // its watch from the token is compacted: it re-reads
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the monitor never re-read")
	}
	c.Close()
	select {
	case <-cl.Done():
	case <-time.After(2 * time.Second):
		t.Fatalf("Coordinator closed 2 s ago; Done still open, Err %v", cl.Err())
	}
	if !errors.Is(cl.Err(), coordinator.ErrClosed) {
		t.Fatalf("Err = %v; want ErrClosed", cl.Err())
	}
}

// TestCloseWhileClassifyingIsNoLoss: an operator force-releases a seat,
// and the Coordinator closes while the monitor's read of why is in
// flight. The claim ends with ErrClosed (nothing watches it any more), not
// ErrSeatLost, and no loss is counted. Before the fix: "seat lost: context
// canceled", counted as unknown.
func TestCloseWhileClassifyingIsNoLoss(t *testing.T) {
	var block atomic.Bool
	entered := make(chan struct{}, 1)
	cli := newObservedClient(t, shared.Endpoint(), blockingCalls[*pb.TxnRequest](&block, entered))
	m := &countingMetrics{}
	c := closableCoord(t, cli, m)
	op := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(c.Prefix()))
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100})
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p")
	cl.Done() // the monitor watches from the grant's revision: it misses nothing
	block.Store(true)
	if _, err := op.ForceRelease(ctx, "p", cl.Seat(), cl.Token(), "maintenance"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the monitor never asked why")
	}
	c.Close()
	<-cl.Done()
	if errors.Is(cl.Err(), coordinator.ErrSeatLost) || len(m.lostCounts()) > 0 {
		t.Fatalf("Err = %v, SeatLost %v; want ErrClosed and no loss counted", cl.Err(), m.lostCounts())
	}
}

// TestReleaseCtxEndKeepsReason: a Release finds the seat already
// force-released, and its caller's ctx ends just as the answer comes. Err
// must still say force-released, by whom and why: the read of why is not
// the caller's. Before the fix: "seat lost: context canceled".
func TestReleaseCtxEndKeepsReason(t *testing.T) {
	var armed atomic.Bool
	var cancelRelease context.CancelFunc
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.TxnRequest); ok && deletesUnder(r, "/seats/") && armed.CompareAndSwap(true, false) {
			cancelRelease() // the caller's deadline passes as the answer comes
		}
		return err
	}
	cli := newObservedClient(t, shared.Endpoint(), ic)
	m := &countingMetrics{}
	c := closableCoord(t, cli, m)
	op := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(c.Prefix()))
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100})
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p")
	if _, err := op.ForceRelease(ctx, "p", cl.Seat(), cl.Token(), "maintenance"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	cancelRelease = cancel
	armed.Store(true)
	if err := cl.Release(rctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Errorf("Release: %v; want ErrNotHeld", err)
	}
	if !errors.Is(cl.Err(), coordinator.ErrForceReleased) {
		t.Fatalf("Err = %v; want ErrForceReleased; SeatLost %v", cl.Err(), m.lostCounts())
	}
}

// TestBorrowedSessionCloseIsNoLoss: closing a borrowed session does not
// revoke its lease, so the seat stays held; the claims adopted on it end
// with ErrClosed, not as expired, and no loss is counted or logged.
// Before the fix: ErrSessionExpired, SeatLost{expired: 1}.
func TestBorrowedSessionCloseIsNoLoss(t *testing.T) {
	m := &countingMetrics{}
	c, cli := newCoord(t, coordinator.WithMetrics(m))
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100})
	owner := testkit.Session(t, cli, 10*time.Second)
	held := mustClaim(t, ctx, c, owner, "p")
	b, err := coordinator.BorrowSession(ctx, cli, owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Adopt(ctx, b, "p", held.Seat(), held.Token())
	if err != nil {
		t.Fatal(err)
	}
	cl.Done()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-cl.Done()
	if !errors.Is(cl.Err(), coordinator.ErrClosed) || len(m.lostCounts()) > 0 {
		t.Fatalf("Err = %v, SeatLost %v; want ErrClosed, no loss", cl.Err(), m.lostCounts())
	}
	if seat, err := c.Seat(ctx, "p", held.Seat()); err != nil || seat.Token != held.Token() {
		t.Fatalf("seat %+v, %v; want it still held", seat, err)
	}
}

// TestAdoptEndsWithSession: a session that ends while Adopt reads the
// seat gets ErrSessionExpired, not a claim. Before the fix Adopt returned
// the claim, its reads bound to the caller's ctx only.
func TestAdoptEndsWithSession(t *testing.T) {
	var block atomic.Bool
	entered, answer := make(chan struct{}, 1), make(chan struct{})
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(*pb.RangeRequest); ok && block.Load() {
			notify(entered)
			select {
			case <-answer:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c := closableCoord(t, newObservedClient(t, shared.Endpoint(), ic), &countingMetrics{})
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100})
	owner := testkit.Session(t, newClient(t), 10*time.Second)
	held := mustClaim(t, ctx, c, owner, "p")
	b, err := coordinator.BorrowSession(ctx, newClient(t), owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	block.Store(true)
	adopted := make(chan error, 1)
	go func() {
		_, err := c.Adopt(ctx, b, "p", held.Seat(), held.Token())
		adopted <- err
	}()
	<-entered
	if err := b.Close(ctx); err != nil { // the session ends while Adopt reads
		t.Fatal(err)
	}
	close(answer) // the read may still come back: the session has ended either way
	if err := <-adopted; !errors.Is(err, coordinator.ErrSessionExpired) {
		t.Fatalf("Adopt: %v; want ErrSessionExpired", err)
	}
}

// TestNoGoroutineGrowth: watched claims and releases, on a pool with a
// feed and bound to an instance and on one without, leave no goroutine
// behind (the monitor, its watches, the feeds once they stop lingering).
func TestNoGoroutineGrowth(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100})
	testkit.CreatePool(t, c, "q", coordinator.PoolSpec{Capacity: 4})
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "q", agent.Lease(), coordinator.Instance{ID: "i1", Addr: "a:1", Seats: 4}); err != nil {
		t.Fatal(err)
	}
	s := testkit.Session(t, cli, 10*time.Second)
	cycles := func(n int) {
		for range n {
			for _, p := range []string{"p", "q"} {
				cl := mustClaim(t, ctx, c, s, p)
				cl.Done()
				if err := cl.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	settled := func() int { // the feed of q stops once it has lingered, and its goroutines end
		testkit.Eventually(t, 10*time.Second, "q's feed to stop", func() bool { return !coordinator.FeedRunning(c, "q") })
		runtime.GC()
		return runtime.NumGoroutine()
	}
	cycles(20)
	before := settled()
	cycles(200)
	for deadline, after := time.Now().Add(10*time.Second), settled(); after > before+5; after = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines grew from %d to %d:\n%s", before, after, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // goroutines ending: polled, up to the deadline
	}
}
