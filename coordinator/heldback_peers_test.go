package coordinator_test

import (
	"context"
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

// TestHeldBackPeersGoFirst: two claimants of tenant "a", in two
// Coordinators (processes), wait held back while "a" holds its limit; a1
// was held back first. When the tenant's seat frees, a1 is served first
// although its process sends its writes 20 ms late (well within
// heldBackGrace): a2's process sees a1's earlier waiting record and lets
// it go first (heldback_peers.go). Without that, a2 joined the line at
// once and took the seat.
func TestHeldBackPeersGoFirst(t *testing.T) {
	prefix := fmt.Sprintf("/heldpeers/%d", time.Now().UnixNano())
	var slow atomic.Bool
	delay := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(*pb.TxnRequest); ok && slow.Load() {
			time.Sleep(20 * time.Millisecond)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	slowCli := newObservedClient(t, shared.Endpoint(), delay)
	fastCli := newClient(t)
	first := testkit.Coordinator(t, slowCli, coordinator.WithPrefix(prefix))
	second := testkit.Coordinator(t, fastCli, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, second, "p", coordinator.PoolSpec{Capacity: 4, TenantLimit: 1})
	held := mustClaim(t, ctx, second, testkit.Session(t, fastCli, 30*time.Second), "p", coordinator.WithTenant("a"))

	granted := make(chan string, 2)
	wait := func(c *coordinator.Coordinator, cli *clientv3.Client, holder string) {
		s := testkit.Session(t, cli, 30*time.Second)
		go func() {
			cl, err := c.Claim(ctx, s, "p", coordinator.WithWait(), coordinator.WithTenant("a"), coordinator.WithHolder(holder))
			if err != nil {
				if ctx.Err() == nil {
					t.Error(holder, err)
				}
				return
			}
			granted <- holder
			_ = cl.Release(ctx)
		}()
	}
	wait(first, slowCli, "a1")
	heldBackCount(t, second, "p", 1)
	wait(second, fastCli, "a2")
	heldBackCount(t, second, "p", 2)

	slow.Store(true)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-granted; got != "a1" {
		t.Fatalf("granted %s first; want a1, held back before a2 (in another process)", got)
	}
	if got := <-granted; got != "a2" {
		t.Fatalf("granted %s second; want a2", got)
	}
}

// TestStaleRecordHoldsBackForGraceOnly: a waiting record of tenant "a"
// that no waiter stands behind (its put landed after its claim ended, and
// its session lives) is earlier than a held-back waiter's own. When the
// tenant's seat frees, that waiter lets it go first for the grace only
// (heldback_peers.go), then joins: granted at least 100 ms after the
// release, and well within seconds; with the records as a rule it would
// wait for the record's session to end.
func TestStaleRecordHoldsBackForGraceOnly(t *testing.T) {
	c, s, held, ctx := tenantPoolHeld(t, func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	ghost := testkit.Session(t, s.Client(), 30*time.Second)
	key := fmt.Sprintf("%s/pools/p/waiting/%016x-%016x", c.Prefix(), int64(ghost.Lease()), 1)
	rec := `{"holder":"ghost","tenant":"a","since":"2026-12-03T00:00:00Z","reason":"tenant_limit"}`
	if _, err := s.Client().Put(ctx, key, rec, clientv3.WithLease(ghost.Lease())); err != nil {
		t.Fatal(err)
	}
	heldBackCount(t, c, "p", 1)
	granted := make(chan time.Time, 1)
	go func() {
		cl, err := c.Claim(ctx, s, "p", coordinator.WithWait(), coordinator.WithTenant("a"), coordinator.WithHolder("w"))
		if err != nil {
			t.Error(err)
			return
		}
		granted <- time.Now()
		_ = cl.Release(ctx)
	}()
	heldBackCount(t, c, "p", 2)
	t0 := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-granted:
		if d := at.Sub(t0); d < 100*time.Millisecond {
			t.Fatalf("granted %v after the release: the earlier record was not let go first", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not granted 5 s after the release: the stale record holds the waiter back")
	}
}
