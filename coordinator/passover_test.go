package coordinator_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestPassedOverWaiterNotOvertaken: a head's grants pass over a waiter
// in line whose tenant is at its limit, and grant one behind it; if the
// tenant's seat frees before that txn applies, the grant behind must not
// apply either, or it overtakes a waiter that could by then be served.
// Here the head's txn is held until the tenant's holder has released: the
// waiter of the tenant must be granted no later than the waiter behind it.
// Before the grants carried the passed-over tenant's slots as compares,
// the waiter behind was granted first.
func TestPassedOverWaiterNotOvertaken(t *testing.T) {
	ht := newHeldTxn(t)
	base, head, waiters, cli, ctx := ht.base, ht.head, ht.waiters, ht.cli, ht.ctx
	testkit.CreatePool(t, base, "p", coordinator.PoolSpec{Capacity: 2, TenantLimits: map[string]int{"a": 2}})

	tenantHolder := mustClaim(t, ctx, base, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithTenant("a"), coordinator.WithHolder("a-holder"))
	mustClaim(t, ctx, base, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("x"))
	wait := ht.wait
	wait(head, "head")
	waitQueued(t, base, "p", 1)
	wait(waiters, "a1", coordinator.WithTenant("a")) // tenant a holds 1 of 2: it joins the line
	waitQueued(t, base, "p", 2)
	wait(waiters, "behind")
	waitQueued(t, base, "p", 3)
	if q, err := base.Queue(ctx, "p"); err != nil || q[1].Holder != "a1" || q[1].Position != 1 {
		t.Fatalf("queue %+v, %v: want a1 second in line", q, err)
	}

	// Two seats free, and tenant a at its limit: the head claims one and
	// grants the other to "behind", passing over a1. While that txn is
	// held, tenant a's seat is released: a1 has room again.
	tokens := ht.holdGrants(func() {
		if _, err := base.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 4, TenantLimits: map[string]int{"a": 1}}, 0); err != nil {
			t.Fatal(err)
		}
	}, func() {
		if err := tenantHolder.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}, 3)
	if tokens["behind"] < tokens["a1"] {
		t.Fatalf("tokens %v: the waiter behind a1 was granted (rev %d) before a1 (rev %d), although tenant a had room from before that grant applied",
			tokens, tokens["behind"], tokens["a1"])
	}
}

// TestPassedOverPinnedWaiterNotOvertaken is TestPassedOverWaiterNotOvertaken
// for a waiter pinned to an instance that is not registered: the head's
// grants pass over it, and grant the waiter behind it; the instance is
// registered again while that txn is held. The grant behind must not
// apply: the instances' compare (passover.go) proves that none was
// registered since the head's view. Without it, the waiter behind was
// granted in the head's txn, before the pinned one.
func TestPassedOverPinnedWaiterNotOvertaken(t *testing.T) {
	ht := newHeldTxn(t)
	base, head, waiters, cli, ctx := ht.base, ht.head, ht.waiters, ht.cli, ht.ctx
	testkit.CreatePool(t, base, "p", coordinator.PoolSpec{Capacity: 2})
	agentX, agentY := testkit.Session(t, cli, 30*time.Second), testkit.Session(t, cli, 30*time.Second)
	register := func(s *coordinator.Session, in coordinator.Instance) {
		if _, err := base.RegisterInstance(ctx, "p", s.Lease(), in); err != nil {
			t.Fatal(err)
		}
	}
	register(agentX, coordinator.Instance{ID: "x", Seats: 1})
	register(agentY, coordinator.Instance{ID: "y", Seats: 4})
	for _, h := range []string{"h1", "h2"} { // the pool full, on y; x free
		mustClaim(t, ctx, base, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithInstance("y"), coordinator.WithHolder(h))
	}

	ht.wait(head, "head")
	waitQueued(t, base, "p", 1)
	ht.wait(waiters, "pinned", coordinator.WithInstance("x")) // x has a free seat: it joins the line
	waitQueued(t, base, "p", 2)
	ht.wait(waiters, "behind")
	waitQueued(t, base, "p", 3)
	if err := base.DeregisterInstance(ctx, "p", "x"); err != nil {
		t.Fatal(err)
	}
	if q, err := base.Queue(ctx, "p"); err != nil || len(q) != 3 || q[1].Holder != "pinned" {
		t.Fatalf("queue %+v, %v: want pinned second in line", q, err)
	}

	// Three seats free, and x not registered: the head claims one on y and
	// grants "behind" another, passing over "pinned". While that txn is
	// held, x is registered again: "pinned" may take its seat.
	tokens := ht.holdGrants(func() {
		if _, err := base.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 5}, 0); err != nil {
			t.Fatal(err)
		}
	}, func() {
		register(agentX, coordinator.Instance{ID: "x", Seats: 1})
	}, 3)
	if tokens["behind"] < tokens["pinned"] {
		t.Fatalf("tokens %v: the waiter behind pinned was granted (rev %d) before pinned (rev %d), although x was registered again before that grant applied",
			tokens, tokens["behind"], tokens["pinned"])
	}
}

// heldTxn is the setting of the tests above: base and waiters are
// Coordinators on clients of their own, head's client holds its first txn
// with grants (holdGrants), and wait claims with wait in the background.
type heldTxn struct {
	t                   *testing.T
	cli                 *clientv3.Client
	ctx                 context.Context
	base, head, waiters *coordinator.Coordinator
	mu                  sync.Mutex
	armed               bool
	caught, hold        chan struct{}
	release             func() // closes hold, once
	granted             chan heldGrant
	claims              sync.WaitGroup // the claims of wait
	ending              atomic.Bool    // the test ends: claims fail as they are cut off
}

type heldGrant struct {
	name string
	cl   *coordinator.Claim
}

func newHeldTxn(t *testing.T) *heldTxn {
	ht := &heldTxn{t: t, caught: make(chan struct{}), hold: make(chan struct{}), granted: make(chan heldGrant, 8)}
	ht.release = sync.OnceFunc(func() { close(ht.hold) })
	// Cleanups run last first: this one, after the claims' ctx is cancelled
	// and the Coordinators are closed, so no claim outlives the test.
	t.Cleanup(ht.claims.Wait)
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && grants(txn) {
			ht.mu.Lock()
			first := ht.armed
			ht.armed = false
			ht.mu.Unlock()
			if first {
				close(ht.caught)
				select {
				case <-ht.hold:
				case <-ctx.Done():
				}
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ht.cli = newClient(t)
	prefix := uniquePrefix(t)
	ht.base = testkit.Coordinator(t, ht.cli, coordinator.WithPrefix(prefix))
	ht.ctx = testkit.Ctx(t, 60*time.Second)
	ht.head = testkit.Coordinator(t, newObservedClient(t, ht.cli.Endpoints()[0], ic), coordinator.WithPrefix(prefix))
	ht.waiters = testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(prefix))
	t.Cleanup(ht.end)
	return ht
}

// end marks the test's end: a held txn goes, and a claim cut off is not
// an error.
func (ht *heldTxn) end() { ht.ending.Store(true); ht.release() }

// wait claims on c with wait, as holder name, in the background.
func (ht *heldTxn) wait(c *coordinator.Coordinator, name string, opts ...coordinator.ClaimOption) {
	s := testkit.Session(ht.t, ht.cli, 30*time.Second)
	ht.t.Cleanup(ht.end) // before the session closes under the claim
	ht.claims.Add(1)
	go func() {
		defer ht.claims.Done()
		cl, err := c.Claim(ht.ctx, s, "p", append(opts, coordinator.WithWait(), coordinator.WithHolder(name))...)
		if err != nil && !ht.ending.Load() {
			ht.t.Errorf("%s: %v", name, err)
		}
		ht.granted <- heldGrant{name, cl} // buffered for every claim of a test
	}()
}

// holdGrants arms the head's client, calls trigger, which must make the
// head send a txn with grants, holds that txn while meanwhile runs, lets
// it go, and returns the tokens of the n claims granted.
func (ht *heldTxn) holdGrants(trigger, meanwhile func(), n int) map[string]int64 {
	t := ht.t
	ht.mu.Lock()
	ht.armed = true
	ht.mu.Unlock()
	trigger()
	select {
	case <-ht.caught:
	case <-time.After(10 * time.Second):
		t.Fatal("the head sent no txn with grants within 10s")
	}
	meanwhile()
	ht.release()
	tokens := map[string]int64{}
	for range n {
		select {
		case g := <-ht.granted:
			if g.cl == nil {
				t.FailNow()
			}
			tokens[g.name] = g.cl.Token()
		case <-time.After(10 * time.Second):
			q, _ := ht.base.Queue(ht.ctx, "p")
			t.Fatalf("granted %v; the rest not within 10s; queue %+v", tokens, q)
		}
	}
	return tokens
}

// grants reports whether a txn nests another: a head's claim with grants.
func grants(txn *pb.TxnRequest) bool {
	for _, op := range txn.Success {
		if op.GetRequestTxn() != nil {
			return true
		}
	}
	return false
}
