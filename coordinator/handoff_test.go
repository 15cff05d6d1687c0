package coordinator_test

import (
	"context"
	"errors"
	"fmt"
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

// TestStaleHandoffReleasesAlone: a release's hand-off is planned on this
// process's view, and its compares join the release's in one txn. When one
// fails (here the pool's spec is rewritten between the plan and the txn),
// nothing of that txn applies; Release must then free the seat alone and
// return nil, and the waiter, now head, claims the seat itself.
func TestStaleHandoffReleasesAlone(t *testing.T) {
	prefix := fmt.Sprintf("/stalehandoff/%d", time.Now().UnixNano())
	raw := newClient(t)
	var spoil atomic.Bool
	var releases atomic.Int64
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.TxnRequest); ok && deletesUnder(r, "/seats/") {
			releases.Add(1)
			if deletesUnder(r, "/queue/") && spoil.CompareAndSwap(true, false) {
				spec := prefix + "/pools/p/spec"
				resp, err := raw.Get(ctx, spec)
				if err == nil {
					_, err = raw.Put(ctx, spec, string(resp.Kvs[0].Value)) // same spec, new mod revision
				}
				if err != nil {
					t.Error(err)
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli := newObservedClient(t, shared.Endpoint(), ic)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	other := testkit.Coordinator(t, raw, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	holder, first := holderAndWaiter(t, ctx, c, other, cli)

	spoil.Store(true)
	releases.Store(0)
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("release after a failed hand-off: %v", err)
	}
	if spoil.Load() {
		t.Fatal("the release planned no hand-off")
	}
	if n := releases.Load(); n != 2 {
		t.Errorf("the release sent %d txns; want 2: the hand-off, then the release alone", n)
	}
	waiterHoldsTheSeat(t, ctx, other, first)
}

// TestHandoffOfLostSeatGrantsNothing: a release's hand-off is planned on
// this process's view, which still shows the releaser's seat. Here that
// seat is force-released between the plan and the txn: the txn must apply
// nothing (no grant of a seat the releaser no longer held), Release must
// report ErrNotHeld, and the waiter must end up with the one seat.
func TestHandoffOfLostSeatGrantsNothing(t *testing.T) {
	prefix := fmt.Sprintf("/losthandoff/%d", time.Now().UnixNano())
	raw := newClient(t)
	var other *coordinator.Coordinator
	var holder *coordinator.Claim
	var steal atomic.Bool
	var handoffs, applied atomic.Int64
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		r, ok := req.(*pb.TxnRequest)
		if !ok || !deletesUnder(r, "/seats/") || !deletesUnder(r, "/queue/") {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		handoffs.Add(1)
		if steal.CompareAndSwap(true, false) {
			if _, err := other.ForceRelease(ctx, "p", holder.Seat(), holder.Token(), "test"); err != nil {
				t.Error(err)
			}
		}
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil && reply.(*pb.TxnResponse).Succeeded {
			applied.Add(1)
		}
		return err
	}
	cli := newObservedClient(t, shared.Endpoint(), ic)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	other = testkit.Coordinator(t, raw, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	h, first := holderAndWaiter(t, ctx, c, other, cli)
	holder = h

	steal.Store(true)
	if err := holder.Release(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("release of a force-released seat: %v; want ErrNotHeld", err)
	}
	if steal.Load() || handoffs.Load() != 1 {
		t.Fatalf("the release sent %d hand-off txns; want 1", handoffs.Load())
	}
	if n := applied.Load(); n != 0 {
		t.Fatalf("the hand-off of a seat its releaser no longer held applied (%d)", n)
	}
	waiterHoldsTheSeat(t, ctx, other, first)
}

// waiterHoldsTheSeat waits for the waiting claim first and checks that
// its seat is the one seat pool "p" holds.
func waiterHoldsTheSeat(t *testing.T, ctx context.Context, other *coordinator.Coordinator, first <-chan *coordinator.Claim) {
	t.Helper()
	select {
	case next := <-first:
		seats, err := other.Seats(ctx, "p")
		if err != nil || len(seats) != 1 || next == nil || seats[0].Token != next.Token() {
			t.Fatalf("the pool holds %+v (%v); want the waiter's seat alone", seats, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter was not granted the seat")
	}
}

// TestHandoffAcrossProcesses: a holder of a small pool keeps its process's
// pool feed while it holds (keepFeed), so its release hands the seat to
// the next waiter in the same txn even when that waiter is another
// process's: here two Coordinators with their own clients, as two
// processes. Before, such a release only freed the seat, and the waiter
// took it with its own claim txn. Both ways to hold are covered: granted
// from the queue, where the process's feed was running already, and
// claimed while the seat was free, where the claim starts the feed.
func TestHandoffAcrossProcesses(t *testing.T) {
	for _, fromQueue := range []bool{true, false} {
		name := map[bool]string{true: "granted-from-queue", false: "claimed-free"}[fromQueue]
		t.Run(name, func(t *testing.T) { testHandoffAcrossProcesses(t, fromQueue) })
	}
}

func testHandoffAcrossProcesses(t *testing.T, fromQueue bool) {
	prefix := fmt.Sprintf("/xhandoff/%d", time.Now().UnixNano())
	var handoffs atomic.Int64
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.TxnRequest); ok && err == nil && deletesUnder(r, "/seats/") && deletesUnder(r, "/queue/") &&
			reply.(*pb.TxnResponse).Succeeded {
			handoffs.Add(1)
		}
		return err
	}
	cliA := newObservedClient(t, shared.Endpoint(), ic)
	a := testkit.Coordinator(t, cliA, coordinator.WithPrefix(prefix))
	cliB := newClient(t, shared.Endpoint())
	b := testkit.Coordinator(t, cliB, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, a, "p", coordinator.PoolSpec{Capacity: 1})
	sa, sb := testkit.Session(t, cliA, 30*time.Second), testkit.Session(t, cliB, 30*time.Second)

	var holder *coordinator.Claim
	if fromQueue {
		first := mustClaim(t, ctx, b, sb, "p")
		granted := claimWaiting(t, ctx, a, sa, "p")
		waitQueued(t, b, "p", 1)
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if holder = <-granted; holder == nil {
			t.FailNow()
		}
	} else {
		holder = mustClaim(t, ctx, a, sa, "p")
	}
	next := claimWaiting(t, ctx, b, sb, "p")
	feedShowsWaiter(t, a, "p", sb.Lease())
	handoffs.Store(0)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := handoffs.Load(); n != 1 {
		t.Errorf("the release handed the seat to the other process's waiter in %d txns; want 1", n)
	}
	waiterHoldsTheSeat(t, ctx, a, next)
	// With its last claim gone, a's process neither waits nor holds: its
	// feed must stop once it has lingered, not watch the pool for good.
	testkit.Eventually(t, 10*time.Second, "the holder's feed to stop", func() bool { return !coordinator.FeedSynced(a, "p") })
}

// deletesUnder, putsUnder and readsUnder report whether txn r's Then
// branch deletes, puts or reads a key whose path has segment.
func deletesUnder(r *pb.TxnRequest, segment string) bool {
	return thenHas(r, segment, func(op *pb.RequestOp) []byte { return op.GetRequestDeleteRange().GetKey() })
}

func putsUnder(r *pb.TxnRequest, segment string) bool {
	return thenHas(r, segment, func(op *pb.RequestOp) []byte { return op.GetRequestPut().GetKey() })
}

func readsUnder(r *pb.TxnRequest, segment string) bool {
	return thenHas(r, segment, func(op *pb.RequestOp) []byte { return op.GetRequestRange().GetKey() })
}

// thenHas reports whether an op of txn r's Then branch has a key (key
// returns nil for other kinds of op) whose path has segment.
func thenHas(r *pb.TxnRequest, segment string, key func(*pb.RequestOp) []byte) bool {
	for _, op := range r.Success {
		if k := key(op); k != nil && strings.Contains(string(k), segment) {
			return true
		}
	}
	return false
}

// TestGrantOfUndecodableSeatIsGivenUp: a waiter woken by a grant whose
// seat value does not decode (written by something other than etcdpool)
// must not hang or return a claim it cannot describe: Claim fails and
// names the seat, and the seat, held under the waiter's lease, is released
// (fenced by its token) so that it does not sit held until the session
// ends.
func TestGrantOfUndecodableSeatIsGivenUp(t *testing.T) {
	prefix := fmt.Sprintf("/badgrant/%d", time.Now().UnixNano())
	cli := newClient(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	ws := testkit.Session(t, cli, 30*time.Second)
	errc := waitingClaim(ctx, c, ws, "p")
	waitQueued(t, c, "p", 1)

	pool := prefix + "/pools/p/"
	q, err := cli.Get(ctx, pool+"queue/", clientv3.WithPrefix())
	if err != nil || len(q.Kvs) != 1 {
		t.Fatalf("queue: %v %v", q, err)
	}
	seats, err := cli.Get(ctx, pool+"seats/", clientv3.WithPrefix())
	if err != nil || len(seats.Kvs) != 1 {
		t.Fatalf("seats: %v %v", seats, err)
	}
	qkey, held := q.Kvs[0], seats.Kvs[0]
	name := keyName(string(qkey.Key))
	bad := pool + "seats/" + fmt.Sprintf("%0*d", coordinator.SlotWidth, 0) + "/" + name
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(qkey.Key)), "=", qkey.CreateRevision)).
		Then(clientv3.OpDelete(string(held.Key)), clientv3.OpPut(bad, "not a seat record", clientv3.WithLease(ws.Lease())),
			clientv3.OpDelete(string(qkey.Key))).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("foreign grant: %v %v", resp, err)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Fatalf("Claim returned %v; want an error that names %q", err, bad)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not return after a grant it cannot decode")
	}
	testkit.Eventually(t, 10*time.Second, "the undecodable seat released", func() bool {
		r, err := cli.Get(ctx, bad)
		return err == nil && len(r.Kvs) == 0
	})
}
