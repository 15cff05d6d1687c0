package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// The tests of a reader that finds the seat number's release record
// overwritten by a later release (endrecord.go). The first two were found
// by a review (2026-12-04): each failed on every run before the fix.

// loseAnswer returns an interceptor that, once armed, lets the first txn
// for which match reports true apply, runs then (if not nil) and returns
// DeadlineExceeded in place of the answer.
func loseAnswer(armed *atomic.Bool, match func(*pb.TxnRequest) bool, then func()) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.TxnRequest); ok && err == nil && match(r) && armed.CompareAndSwap(true, false) {
			if then != nil {
				then()
			}
			return context.DeadlineExceeded
		}
		return err
	}
}

// TestLostHandoffAnswerAfterNextRelease: a release hands the seat off and
// commits, and its answer is lost; before the retry (the release alone)
// reads the release record, the waiter it granted releases the seat too,
// overwriting the record. The retry must still tell that its first try
// released the seat: Release returns nil, and Err is ErrReleased, not
// ErrSeatLost. Before the fix: ErrNotHeld, and a seat-lost alarm.
func TestLostHandoffAnswerAfterNextRelease(t *testing.T) {
	var armed atomic.Bool
	granted := make(chan *coordinator.Claim, 1)
	handoff := func(r *pb.TxnRequest) bool { return deletesUnder(r, "/seats/") && deletesUnder(r, "/queue/") }
	nextReleased := func() {
		if err := (<-granted).Release(context.Background()); err != nil { // granted by this very txn
			t.Errorf("the next holder's release: %v", err)
		}
	}
	ctx, c, holder, next, waiter := heldWithWaiterElsewhere(t, loseAnswer(&armed, handoff, nextReleased))
	feedShowsWaiter(t, c, "p", waiter)
	go func() { granted <- <-next }()
	armed.Store(true)
	err := holder.Release(ctx)
	if armed.Load() {
		t.Fatal("the release planned no hand-off")
	}
	if err != nil {
		t.Errorf("Release: %v; want nil: its first try released the seat", err)
	}
	if !errors.Is(holder.Err(), coordinator.ErrReleased) {
		t.Errorf("Err: %v; want ErrReleased", holder.Err())
	}
}

// TestLostForceReleaseAnswerRecognised: ForceReleaseBy's first try
// commits and its answer is lost; the retry reads its own forced record
// and must take it as its own success. Before the fix it returned
// ErrNotHeld: a retry recognised only records that were not forced.
func TestLostForceReleaseAnswerRecognised(t *testing.T) {
	var armed atomic.Bool
	cli := newObservedClient(t, shared.Endpoint(), loseAnswer(&armed, func(r *pb.TxnRequest) bool { return deletesUnder(r, "/seats/") }, nil))
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(uniquePrefix(t)))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	holder := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	armed.Store(true)
	if err := holder.ForceReleaseBy(ctx, "maintenance", "ops@example"); err != nil {
		t.Errorf("ForceReleaseBy: %v; want nil: its first try freed the seat", err)
	}
	if armed.Load() {
		t.Fatal("no answer was lost")
	}
	if err := holder.Err(); !errors.Is(err, coordinator.ErrForceReleased) || !strings.Contains(err.Error(), "ops@example: maintenance") {
		t.Errorf("Err: %v; want ErrForceReleased by ops@example", err)
	}
}

// TestLostTryNotTakenForOtherCallsRelease: a retry recognises the record
// of its own call only. Two Release calls of one claim race: the first
// try of one is lost before etcd sees it (the client reports a deadline),
// and while it backs off the other commits. The retry finds the seat gone
// and a record of the claim's token, not forced, with the same (empty)
// reason: the other call's. Exactly one call freed the seat, so exactly
// one returns nil. Before the fix both did.
func TestLostTryNotTakenForOtherCallsRelease(t *testing.T) {
	var armed atomic.Bool
	var holder *coordinator.Claim
	other := make(chan error, 1)
	drop := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.TxnRequest); ok && deletesUnder(r, "/seats/") && armed.CompareAndSwap(true, false) {
			other <- holder.Release(context.Background()) // the other call, while this one's try is lost
			return context.DeadlineExceeded               // before etcd saw it
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli := newObservedClient(t, shared.Endpoint(), drop)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(uniquePrefix(t)))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	holder = mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	armed.Store(true)
	err := holder.Release(ctx)
	if armed.Load() {
		t.Fatal("no try was lost")
	}
	if oerr := <-other; oerr != nil {
		t.Fatalf("the call that committed: %v", oerr)
	}
	if !errors.Is(err, coordinator.ErrNotHeld) {
		t.Errorf("the call whose try was lost: %v; want ErrNotHeld: the other call freed the seat", err)
	}
	if !errors.Is(holder.Err(), coordinator.ErrReleased) {
		t.Errorf("Err: %v; want ErrReleased", holder.Err())
	}
}

// TestMonitorReadsOverwrittenForceRecord: an operator force-releases a
// seat, and before the holder's monitor has read why its seat key went,
// the seat is granted to a waiter that releases it again, overwriting the
// record. The holder's Err must still say force-released, by whom and
// why: not ErrSeatLost.
func TestMonitorReadsOverwrittenForceRecord(t *testing.T) {
	hold := make(chan struct{})
	var armed atomic.Bool
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.TxnRequest); ok && readsUnder(r, "/released/") && armed.Load() {
			<-hold // the monitor's read of why the seat went waits until the record is overwritten
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, c, holder, next, _ := heldWithWaiterElsewhere(t, ic)
	armed.Store(true)
	if _, err := c.ForceRelease(ctx, "p", holder.Seat(), holder.Token(), "drain"); err != nil {
		t.Fatal(err)
	}
	if err := (<-next).Release(ctx); err != nil { // the record is now the next holder's
		t.Fatal(err)
	}
	close(hold)
	select {
	case <-holder.Done():
	case <-ctx.Done():
		t.Fatal("the holder's Done did not close")
	}
	if err := holder.Err(); !errors.Is(err, coordinator.ErrForceReleased) || !strings.Contains(err.Error(), "drain") {
		t.Errorf("Err: %v; want ErrForceReleased, reason drain", err)
	}
}

// heldWithWaiterElsewhere creates pool "p" of one seat on a Coordinator
// whose client passes its unary calls through ic, fills it, and queues a
// waiter behind the holder on another Coordinator with a client of its
// own, as another process would. It returns the test's ctx, the holder's
// Coordinator and claim, the waiter's claim to come, and its lease.
func heldWithWaiterElsewhere(t *testing.T, ic grpc.UnaryClientInterceptor) (context.Context, *coordinator.Coordinator, *coordinator.Claim, <-chan *coordinator.Claim, clientv3.LeaseID) {
	t.Helper()
	cli, raw := newObservedClient(t, shared.Endpoint(), ic), newClient(t)
	prefix := uniquePrefix(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	other := testkit.Coordinator(t, raw, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	holder := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	ws := testkit.Session(t, raw, 30*time.Second)
	next := claimWaiting(t, ctx, other, ws, "p")
	waitQueued(t, other, "p", 1)
	return ctx, c, holder, next, ws.Lease()
}

// TestDoneClosesWhileReleaseAnswerLate: a release txn commits, and its
// answer is held for 3 s and then lost. The seat is gone and may be
// granted again at once, so the claim's Done must close soon after the
// commit, with ErrReleased, not when Release gives up waiting for the
// answer. Before the fix the monitor waited for Release: Done closed
// after the 3 s.
func TestDoneClosesWhileReleaseAnswerLate(t *testing.T) {
	const late = 3 * time.Second
	var armed atomic.Bool
	committed := make(chan time.Time, 1)
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.TxnRequest); ok && err == nil && deletesUnder(r, "/seats/") && armed.CompareAndSwap(true, false) {
			committed <- time.Now()
			time.Sleep(late)
			return context.DeadlineExceeded
		}
		return err
	}
	cli := newObservedClient(t, shared.Endpoint(), ic)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(uniquePrefix(t)))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	holder := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	holder.Done() // the monitor runs before the release
	armed.Store(true)
	released := make(chan error, 1)
	go func() { released <- holder.Release(ctx) }()
	at := <-committed
	select {
	case <-holder.Done():
		if d := time.Since(at); d > late/2 {
			t.Errorf("Done closed %v after the release committed; want well before its answer (%v)", d, late)
		}
	case <-ctx.Done():
		t.Fatal("Done never closed")
	}
	if !errors.Is(holder.Err(), coordinator.ErrReleased) {
		t.Errorf("Err: %v; want ErrReleased", holder.Err())
	}
	if err := <-released; err != nil {
		t.Errorf("Release: %v; want nil: its txn committed", err)
	}
}
