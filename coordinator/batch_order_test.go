package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestBatchGrantsStopAtFirstRefused: the head's txn grants seats to the
// waiters behind it, planned in arrival order on its view. When the grant
// of one of them fails on the server (here waiter A's fence moves between
// the plan and the txn, as when A's session resolves an ambiguous claim
// txn of another of its claims), no waiter behind A may be granted in that
// txn: B would overtake A, who still waits. Found by TestChaos (FIFO
// checker), 2026-12-02.
func TestBatchGrantsStopAtFirstRefused(t *testing.T) {
	prefix := fmt.Sprintf("/batchorder/%d", time.Now().UnixNano())
	raw := newClient(t)
	var fenceA atomic.Value // the fence key of A's lease, once armed
	var leaseA atomic.Int64
	var moved atomic.Bool
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.TxnRequest); ok && grantsBehind(r) {
			if key, ok := fenceA.Load().(string); ok && moved.CompareAndSwap(false, true) {
				if _, err := raw.Put(ctx, key, "", clientv3.WithLease(clientv3.LeaseID(leaseA.Load()))); err != nil {
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
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 3})

	// Three seats held by one session of another process; X, A and B wait
	// in that order, each with its own session, in this process.
	hs := testkit.Session(t, raw, 30*time.Second)
	for range 3 {
		mustClaim(t, ctx, other, hs, "p")
	}
	var got [3]<-chan *coordinator.Claim
	sessions := make([]*coordinator.Session, 3)
	for i := range got {
		sessions[i] = testkit.Session(t, cli, 30*time.Second)
		got[i] = claimWaiting(t, ctx, c, sessions[i], "p")
		waitQueued(t, other, "p", i+1)
	}
	leaseA.Store(int64(sessions[1].Lease()))
	fenceA.Store(fmt.Sprintf("%s/pools/p/fences/%016x", prefix, int64(sessions[1].Lease())))
	// The holders' session ends: the three seats are free at once, and the
	// head, X, grants A and B in its own txn.
	if _, err := raw.Revoke(ctx, hs.Lease()); err != nil {
		t.Fatal(err)
	}
	var tokens [3]int64
	for i, ch := range got {
		select {
		case cl := <-ch:
			if cl == nil {
				t.Fatalf("waiter %d was not granted", i)
			}
			tokens[i] = cl.Token()
		case <-ctx.Done():
			t.Fatalf("waiter %d was not granted", i)
		}
	}
	if !moved.Load() {
		t.Fatal("the head granted nobody behind it in its txn")
	}
	if tokens[2] < tokens[1] {
		t.Fatalf("B was granted at revision %d, before A at %d: A's grant failed and B's applied in the same txn", tokens[2], tokens[1])
	}
}

// grantsBehind reports whether r is a head's claim txn that grants seats
// to waiters behind it (nested txns among its writes).
func grantsBehind(r *pb.TxnRequest) bool {
	for _, op := range r.Success {
		if op.GetRequestTxn() != nil {
			return true
		}
	}
	return false
}

// tooManyOpsClient returns a client of url that counts the requests etcd
// refuses as too many operations (its --max-txn-ops).
func tooManyOpsClient(t *testing.T, url string) (*clientv3.Client, *atomic.Int32) {
	t.Helper()
	var refused atomic.Int32
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if errors.Is(rpctypes.Error(err), rpctypes.ErrTooManyOps) {
			refused.Add(1)
		}
		return err
	}
	return newObservedClient(t, url, ic), &refused
}

// TestGrantsOnLowMaxTxnOps: on an etcd whose --max-txn-ops is set below
// the default the head's chain of grants is cut to (128), etcd refuses the
// head's txn as too many operations, having applied nothing. The head must
// then claim alone, and every waiter still be granted in queue order. And
// only the first heads may pay for a refused txn: the Coordinator chains
// fewer grants from then on. (At 16 ops, each head sent a refused chain
// until 2 waiters were left behind it: 9 refusals for 12 waiters.)
func TestGrantsOnLowMaxTxnOps(t *testing.T) {
	cli, refused := tooManyOpsClient(t, etcdtest.StartMaxTxnOps(t, 16))
	c := testkit.Coordinator(t, cli)
	ctx := testkit.Ctx(t, 60*time.Second)
	const capacity, waiters = 12, 12
	dying := fullPool(t, ctx, c, cli, capacity)
	got := make([]<-chan *coordinator.Claim, waiters)
	for i := range got {
		got[i] = claimWaiting(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
		waitQueued(t, c, "p", i+1)
	}
	if _, err := cli.Revoke(ctx, dying.Lease()); err != nil {
		t.Fatal(err)
	}
	last := int64(0)
	for i := range capacity {
		select {
		case cl := <-got[i]:
			if cl == nil {
				t.FailNow() // claimWaiting reported its error
			}
			if cl.Token() < last {
				t.Fatalf("waiter %d granted at revision %d, before waiter %d at %d", i, cl.Token(), i-1, last)
			}
			last = cl.Token()
		case <-ctx.Done():
			t.Fatalf("waiter %d was not granted", i)
		}
	}
	if n := refused.Load(); n == 0 || n > 4 {
		t.Fatalf("etcd refused %d head txns as too many operations; want 1 to 4 (the chain shortens after each)", n)
	}
	t.Logf("%d head txns refused", refused.Load())
}

// TestRefusedHandoffReleasesAlone: a release that hands its seat to the
// first waiter carries that waiter's grant, one compare more than a claim.
// On an etcd whose --max-txn-ops admits the claims of a tenant-limited pool
// (9: 8 until claims of anonymous seats compared the instances' range too,
// 2026-12-04) but not that hand-off, etcd refuses it, having applied nothing: the
// release must go again alone at once, not back off and retry as if its
// answer were lost, and the waiter then claims the seat. The Coordinator
// remembers the refusal: the next release of the same shape goes alone at
// once, without a refused txn first.
func TestRefusedHandoffReleasesAlone(t *testing.T) {
	url := etcdtest.StartMaxTxnOps(t, 9)
	var refusals atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if _, ok := req.(*pb.TxnRequest); ok && errors.Is(rpctypes.Error(err), rpctypes.ErrTooManyOps) {
			refusals.Add(1)
		}
		return err
	}
	cli := newDialedClient(t, url, grpc.WithChainUnaryInterceptor(count))
	m := &countingMetrics{}
	c := testkit.Coordinator(t, cli, coordinator.WithMetrics(m))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1, TenantLimit: 1})
	held := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithTenant("t0"))
	for round := 1; round <= 2; round++ {
		ws := testkit.Session(t, cli, 30*time.Second)
		next := make(chan *coordinator.Claim, 1)
		go func() {
			cl, err := c.Claim(ctx, ws, "p", coordinator.WithWait(), coordinator.WithTenant(fmt.Sprintf("t%d", round)))
			if err != nil {
				t.Errorf("round %d: the waiter: %v", round, err)
			}
			next <- cl
		}()
		feedShowsWaiter(t, c, "p", ws.Lease())
		if err := held.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", round, err)
		}
		// Round 1 plans a hand-off, which etcd refuses; round 2 must not
		// send one of the same shape again.
		if n := refusals.Load(); n != 1 {
			t.Fatalf("round %d: etcd refused %d txns as too many operations; want 1 (the first hand-off)", round, n)
		}
		if n := m.releaseRetries.Load(); n != 0 {
			t.Fatalf("round %d: the release retried %d times after etcd refused its hand-off; want it sent again alone at once", round, n)
		}
		if held = <-next; held == nil {
			t.FailNow()
		}
	}
}

// fullPool creates pool "p" of capacity seats on c and fills it with
// claims of one session, which it returns: revoking its lease frees every
// seat in one revision.
func fullPool(t *testing.T, ctx context.Context, c *coordinator.Coordinator, cli *clientv3.Client, capacity int) *coordinator.Session {
	t.Helper()
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: capacity})
	dying := testkit.Session(t, cli, 30*time.Second)
	for range capacity {
		mustClaim(t, ctx, c, dying, "p")
	}
	return dying
}

// TestUnprovenStepOutOnLowMaxTxnOps: a head barred by its tenant's limit
// of 8 steps out with a proof of 10 compares (8 held slots, the spec, its
// queue key), which an etcd whose --max-txn-ops is 9 refuses as too many
// operations, having applied nothing. The step-out is sent again without
// the proof, as before the proof existed: the head leaves the line with
// its waiting record (it does not take the refusal for one of its record
// and wait unrecorded), and the waiter behind it is served.
func TestUnprovenStepOutOnLowMaxTxnOps(t *testing.T) {
	url := etcdtest.StartMaxTxnOps(t, 9)
	cli := newDialedClient(t, url)
	c := testkit.Coordinator(t, cli)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 9, TenantLimits: map[string]int{"a": 9}})
	for range 8 {
		mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithTenant("a"))
	}
	ySess := testkit.Session(t, cli, 30*time.Second)
	mustClaim(t, ctx, c, ySess, "p")
	granted := make(chan string, 2)
	for _, w := range []struct {
		name string
		opts []coordinator.ClaimOption
	}{{"H", []coordinator.ClaimOption{coordinator.WithTenant("a")}}, {"W2", nil}} {
		s := testkit.Session(t, cli, 30*time.Second)
		go func() {
			if _, err := c.Claim(ctx, s, "p", append(w.opts, coordinator.WithWait(), coordinator.WithHolder(w.name))...); err == nil {
				granted <- w.name
			}
		}()
		waitQueued(t, c, "p", map[string]int{"H": 1, "W2": 2}[w.name])
	}
	// Tenant a's limit drops to 8: H is barred by it, hidden by the full
	// pool until y's seat frees.
	if _, err := c.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 9, TenantLimits: map[string]int{"a": 8}}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, ySess.Lease()); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-granted:
		if name != "W2" {
			t.Fatalf("%s granted; want W2, H being barred by its tenant's limit", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("W2 not granted within 10 s of a seat freeing")
	}
	testkit.Eventually(t, 5*time.Second, "H held back with its waiting record", func() bool {
		q, err := c.Queue(ctx, "p")
		return err == nil && len(q) == 1 && q[0].Holder == "H" && q[0].Reason == coordinator.WaitTenantLimit
	})
}
