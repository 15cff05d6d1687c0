package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
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
	var (
		mu     sync.Mutex
		armed  bool
		caught = make(chan struct{})
		hold   = make(chan struct{})
	)
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && grants(txn) {
			mu.Lock()
			first := armed
			armed = false
			mu.Unlock()
			if first {
				close(caught)
				<-hold
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli := newClient(t)
	prefixSeq++
	prefix := fmt.Sprintf("/test/%s/%d", t.Name(), prefixSeq)
	base := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, base, "p", coordinator.PoolSpec{Capacity: 2, TenantLimits: map[string]int{"a": 2}})
	head := testkit.Coordinator(t, newObservedClient(t, cli.Endpoints()[0], ic), coordinator.WithPrefix(prefix))
	waiters := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(prefix))

	tenantHolder := mustClaim(t, ctx, base, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithTenant("a"), coordinator.WithHolder("a-holder"))
	mustClaim(t, ctx, base, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithHolder("x"))
	type grant struct {
		name string
		cl   *coordinator.Claim
	}
	granted := make(chan grant, 3)
	wait := func(c *coordinator.Coordinator, name string, opts ...coordinator.ClaimOption) {
		s := testkit.Session(t, cli, 30*time.Second)
		go func() {
			cl, err := c.Claim(ctx, s, "p", append(opts, coordinator.WithWait(), coordinator.WithHolder(name))...)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			granted <- grant{name, cl}
		}()
	}
	wait(head, "head")
	waitQueued(t, base, "p", 1)
	wait(waiters, "a1", coordinator.WithTenant("a")) // tenant a holds 1 of 2: it joins the line
	waitQueued(t, base, "p", 2)
	wait(waiters, "behind")
	waitQueued(t, base, "p", 3)
	if q, err := base.Queue(ctx, "p"); err != nil || q[1].Holder != "a1" || q[1].Position != 1 {
		t.Fatalf("queue %+v, %v: want a1 second in line", q, err)
	}

	mu.Lock()
	armed = true
	mu.Unlock()
	// Two seats free, and tenant a at its limit: the head claims one and
	// grants the other to "behind", passing over a1.
	if _, err := base.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 4, TenantLimits: map[string]int{"a": 1}}, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-caught:
	case <-time.After(10 * time.Second):
		t.Fatal("the head sent no txn with grants within 10s of the capacity change")
	}
	if err := tenantHolder.Release(ctx); err != nil { // tenant a has room again
		t.Fatal(err)
	}
	close(hold)
	tokens := map[string]int64{}
	for range 3 {
		select {
		case g := <-granted:
			if g.cl == nil {
				t.FailNow()
			}
			tokens[g.name] = g.cl.Token()
		case <-time.After(10 * time.Second):
			q, _ := base.Queue(ctx, "p")
			t.Fatalf("granted %v; the rest not within 10s; queue %+v", tokens, q)
		}
	}
	if tokens["behind"] < tokens["a1"] {
		t.Fatalf("tokens %v: the waiter behind a1 was granted (rev %d) before a1 (rev %d), although tenant a had room from before that grant applied",
			tokens, tokens["behind"], tokens["a1"])
	}
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
