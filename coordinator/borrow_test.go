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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// A borrowed session claims on a lease its owner keeps alive; it outlives
// its own TTL only through the owner's keepalives, ends when the owner
// stops them, and never revokes the lease.
func TestBorrowedSessionFollowsTheOwnersLease(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "calls", coordinator.PoolSpec{Capacity: 1})
	owner := testkit.Session(t, cli, 2*time.Second)

	b, err := coordinator.BorrowSession(ctx, cli, owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if !b.Borrowed() || b.TTL() != 2*time.Second {
		t.Fatalf("borrowed = %v, TTL %v; want true, 2s", b.Borrowed(), b.TTL())
	}
	cl := mustClaim(t, ctx, c, b, "calls")
	cl.Detach()
	if !errors.Is(cl.Err(), coordinator.ErrClosed) {
		t.Fatalf("detached claim Err = %v, want ErrClosed", cl.Err())
	}
	// Past the TTL: a session that followed nothing would be gone by then.
	time.Sleep(2500 * time.Millisecond)
	if err := b.Err(); err != nil {
		t.Fatalf("borrowed session ended while its owner kept the lease alive: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Seat(ctx, "calls", cl.Seat()); err != nil {
		t.Fatalf("closing the borrowed session freed the seat (lease revoked?): %v", err)
	}

	b2, err := coordinator.BorrowSession(ctx, cli, owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close(context.Background()) })
	if _, err := cli.Revoke(ctx, owner.Lease()); err != nil { // the owner ends its session
		t.Fatal(err)
	}
	select {
	case <-b2.Done():
	case <-time.After(2 * time.Second): // it asks every TTL/3
		t.Fatal("borrowed session outlived its lease by 2s")
	}
	if !errors.Is(b2.Err(), coordinator.ErrSessionExpired) {
		t.Fatalf("Err = %v, want ErrSessionExpired", b2.Err())
	}
	if _, err := coordinator.BorrowSession(ctx, cli, owner.Lease()); !errors.Is(err, coordinator.ErrSessionExpired) {
		t.Fatalf("borrow of an expired lease: %v, want ErrSessionExpired", err)
	}
	if _, err := coordinator.BorrowSession(ctx, cli, clientv3.NoLease); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("borrow of no lease: %v, want ErrInvalid", err)
	}
}

// ReleaseBy and ForceReleaseBy record the identity given, and the holder
// of a force-released seat reads it in Err.
func TestReleaseByNamesTheReleaser(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "calls", coordinator.PoolSpec{Capacity: 2})
	s := testkit.Session(t, cli, 5*time.Second)
	a := mustClaim(t, ctx, c, s, "calls", coordinator.WithHolder("client-says-anything"))
	if err := a.ReleaseBy(ctx, ""); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("ReleaseBy(\"\") = %v, want ErrInvalid", err)
	}
	if err := a.ReleaseBy(ctx, "principal-a"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, coordinator.SegPrefix(c.Prefix(), "calls", coordinator.SegReleased), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"by":"principal-a"`) {
		t.Fatalf("release record = %v, %v; want by principal-a", resp, err)
	}
	b := mustClaim(t, ctx, c, s, "calls")
	b.Done() // start the monitor before the force-release
	// The operator borrows the holder's lease and adopts the claim.
	op, err := coordinator.BorrowSession(ctx, cli, b.Lease())
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close(ctx)
	if _, err := c.Adopt(ctx, op, "calls", b.Seat(), b.Token()+1); !errors.Is(err, coordinator.ErrStaleToken) {
		t.Fatalf("adopt with a stale token: %v, want ErrStaleToken", err)
	}
	cl, err := c.Adopt(ctx, op, "calls", b.Seat(), b.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ForceReleaseBy(ctx, "abuse", "ops-team"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatal("holder not told of the force-release")
	}
	if err := b.Err(); !errors.Is(err, coordinator.ErrForceReleased) || !strings.Contains(err.Error(), "by ops-team: abuse") {
		t.Fatalf("holder's Err = %v, want force-released by ops-team: abuse", err)
	}
}

// A claim on a borrowed session whose answer comes after the session's
// local deadline gives its seat up (ErrSessionExpired), and the release
// that frees it is tried until it passes: the replica that claimed (an
// HTTP API's) was cut off from etcd, while the lease's owner keeps the
// lease alive through another. Found by a review (2026-12-05): the
// release was tried for the cleanup timeout only, and the seat stayed
// held by nobody for as long as the owner kept its lease.
func TestBorrowedGiveUpFreesSeat(t *testing.T) {
	var armed, cut atomic.Bool
	var bs atomic.Pointer[coordinator.Session]
	var refused atomic.Int64
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cut.Load() {
			if method == "/etcdserverpb.Lease/LeaseTimeToLive" {
				return status.Error(codes.Unavailable, "test: replica cut off")
			}
			if r, ok := req.(*pb.TxnRequest); ok && deletesUnder(r, "/seats/") {
				refused.Add(1)
				return status.Error(codes.Unavailable, "test: replica cut off")
			}
		}
		if r, ok := req.(*pb.TxnRequest); ok && putsUnder(r, "/seats/") && armed.CompareAndSwap(true, false) {
			err := invoker(context.Background(), method, req, reply, cc, opts...) // it commits
			cut.Store(true)
			<-bs.Load().Done() // its answer comes after the local deadline
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	direct := newClient(t)
	prefix := uniquePrefix(t)
	c := testkit.Coordinator(t, newObservedClient(t, shared.Endpoint(), ic), coordinator.WithPrefix(prefix), coordinator.WithCleanupTimeout(time.Second))
	obs := testkit.Coordinator(t, direct, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, obs, "p", coordinator.PoolSpec{Capacity: 1})
	owner := testkit.Session(t, direct, 3*time.Second) // keeps its lease alive
	b, err := coordinator.BorrowSession(ctx, c.Client(), owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	bs.Store(b)
	armed.Store(true)
	if cl, err := c.Claim(ctx, b, "p"); !errors.Is(err, coordinator.ErrSessionExpired) {
		t.Fatalf("Claim answered after the deadline: %v, %v; want ErrSessionExpired", cl, err)
	}
	time.Sleep(2 * time.Second) // past the cleanup timeout (1 s), which bounded the release before
	if refused.Load() == 0 {
		t.Fatal("no release was tried while the replica was cut off")
	}
	cut.Store(false) // the replica reaches etcd again
	testkit.Eventually(t, 10*time.Second, "the given-up seat freed", func() bool {
		seats, err := obs.Seats(ctx, "p")
		return err == nil && len(seats) == 0
	})
	if owner.Err() != nil {
		t.Fatalf("the owner's session ended (%v): the seat went with the lease, which proves nothing", owner.Err())
	}
}

// A held-back waiter on a borrowed session whose session ends at its local
// deadline removes its waiting record all the same: the lease's owner may
// keep the lease, and the record, alive through another replica. Found by
// a review (2026-12-05): the record was left to go with the lease, and
// Queue showed a waiter nobody served for as long as the owner kept it.
func TestBorrowedWaitingRecordRemoved(t *testing.T) {
	var cut atomic.Bool
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cut.Load() && method == "/etcdserverpb.Lease/LeaseTimeToLive" {
			return status.Error(codes.Unavailable, "test: replica cut off")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	direct := newClient(t)
	prefix := uniquePrefix(t)
	c := testkit.Coordinator(t, newObservedClient(t, shared.Endpoint(), ic), coordinator.WithPrefix(prefix))
	obs := testkit.Coordinator(t, direct, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, obs, "p", coordinator.PoolSpec{Capacity: 4, TenantLimit: 1})
	mustClaim(t, ctx, obs, testkit.Session(t, direct, 30*time.Second), "p", coordinator.WithTenant("a"))
	owner := testkit.Session(t, direct, 3*time.Second)
	b, err := coordinator.BorrowSession(ctx, c.Client(), owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Claim(ctx, b, "p", coordinator.WithTenant("a"), coordinator.WithWait())
		done <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the held-back waiter's record", func() bool {
		q, err := obs.Queue(ctx, "p")
		return err == nil && len(q) == 1
	})
	cut.Store(true) // the borrowed session's deadline passes; the lease lives
	select {
	case err := <-done:
		if !errors.Is(err, coordinator.ErrSessionExpired) {
			t.Fatalf("the waiting claim: %v; want ErrSessionExpired", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim did not end with its borrowed session")
	}
	testkit.Eventually(t, 10*time.Second, "the waiting record removed", func() bool {
		q, err := obs.Queue(ctx, "p")
		return err == nil && len(q) == 0
	})
	if owner.Err() != nil {
		t.Fatalf("the owner's session ended (%v): the record went with the lease, which proves nothing", owner.Err())
	}
}
