package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// readCounter counts the claim txns a client sends and the keys its
// replies bring back.
type readCounter struct {
	txns, keys atomic.Int64
	whole      atomic.Int64 // plain range reads of a whole prefix
}

func (rc *readCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	switch r := reply.(type) {
	case *pb.TxnResponse:
		if len(req.(*pb.TxnRequest).Compare) > 0 {
			rc.txns.Add(1)
		}
		rc.keys.Add(int64(keysIn(r)))
	case *pb.RangeResponse:
		rc.keys.Add(int64(len(r.Kvs)))
		if len(req.(*pb.RangeRequest).RangeEnd) > 0 {
			rc.whole.Add(1)
		}
	}
	return err
}

func keysIn(r *pb.TxnResponse) (n int) {
	for _, op := range r.Responses {
		n += len(op.GetResponseRange().GetKvs())
		if t := op.GetResponseTxn(); t != nil {
			n += keysIn(t)
		}
	}
	return n
}

// TestFirstClaimReadsWhatItNeeds holds 1,000 seats of a pool from one
// process and claims from a new one: its first claim, and a claim whose
// txn fails on a stale spec, each read a probe (tens of keys) rather than
// the pool's thousands of keys.
func TestFirstClaimReadsWhatItNeeds(t *testing.T) {
	prefix := fmt.Sprintf("/probe/%d", time.Now().UnixNano())
	ctx := testkit.Ctx(t, 3*time.Minute)
	other := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(prefix))
	testkit.CreatePool(t, other, "p", coordinator.PoolSpec{Capacity: 5000, TenantLimit: 2000})
	const held, tenants = 1000, 10
	holder := testkit.Session(t, other.Client(), 60*time.Second)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < held; i += 8 {
				if _, err := other.Claim(ctx, holder, "p", coordinator.WithTenant(fmt.Sprintf("t%d", i%tenants))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	resp, err := other.Client().Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	whole := len(resp.Kvs)

	rc := &readCounter{}
	c := testkit.Coordinator(t, newObservedClient(t, shared.Endpoint(), rc.intercept), coordinator.WithPrefix(prefix))
	s := testkit.Session(t, c.Client(), 30*time.Second)
	testkit.Claim(t, c, s, "p", coordinator.WithTenant("t3"))
	// A probe: the spec, at most 64 seats, and t3's 100 slots.
	const bound = 1 + 64 + held/tenants + 8
	first := rc.keys.Load()
	t.Logf("first claim: %d keys read (whole pool: %d keys), %d claim txns", first, whole, rc.txns.Load())
	if first > bound || whole < 2*held {
		t.Fatalf("first claim read %d keys, want at most %d (the whole pool has %d)", first, bound, whole)
	}
	if rc.whole.Load() != 0 {
		t.Fatalf("first claim read a whole prefix %d times", rc.whole.Load())
	}

	p, err := other.GetPool(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	spec := p.Spec
	spec.Capacity++
	if _, err := other.UpdatePool(ctx, "p", spec, p.Revision); err != nil {
		t.Fatal(err)
	}
	rc.keys.Store(0)
	rc.txns.Store(0)
	testkit.Claim(t, c, s, "p", coordinator.WithTenant("t3"))
	t.Logf("claim on a stale spec: %d claim txns, %d keys read", rc.txns.Load(), rc.keys.Load())
	if rc.txns.Load() < 2 {
		t.Fatalf("the stale claim sent %d claim txns; the test meant its first to fail", rc.txns.Load())
	}
	if k := rc.keys.Load(); k > bound {
		t.Fatalf("the failed claim's Else branch read %d keys, want at most %d", k, bound)
	}
}

// TestProbeFallsBackToWholeRead frees one low seat of a full pool: the
// probe's highest seats are all held, so the claim must read the whole pool
// to find the free one, and it does.
func TestProbeFallsBackToWholeRead(t *testing.T) {
	prefix := fmt.Sprintf("/probe-whole/%d", time.Now().UnixNano())
	ctx := testkit.Ctx(t, 2*time.Minute)
	other := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(prefix))
	const capacity = 200
	testkit.CreatePool(t, other, "p", coordinator.PoolSpec{Capacity: capacity})
	holder := testkit.Session(t, other.Client(), 60*time.Second)
	var low *coordinator.Claim
	for range capacity {
		cl := testkit.Claim(t, other, holder, "p")
		if low == nil || cl.Seat() < low.Seat() {
			low = cl
		}
	}
	if low.Seat() >= capacity-64 {
		t.Fatalf("lowest seat held is %d", low.Seat())
	}
	if err := low.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rc := &readCounter{}
	c := testkit.Coordinator(t, newObservedClient(t, shared.Endpoint(), rc.intercept), coordinator.WithPrefix(prefix))
	s := testkit.Session(t, c.Client(), 30*time.Second)
	cl := testkit.Claim(t, c, s, "p")
	if cl.Seat() != low.Seat() {
		t.Fatalf("claimed seat %d, want the only free one, %d", cl.Seat(), low.Seat())
	}
	if rc.whole.Load() != 1 {
		t.Fatalf("%d whole reads, want 1 (after the probe found no free seat)", rc.whole.Load())
	}
	if _, err := c.Claim(ctx, s, "p"); err == nil {
		t.Fatal("a claim on the full pool succeeded")
	}
}
