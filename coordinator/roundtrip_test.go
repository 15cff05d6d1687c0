package coordinator_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
)

// TestUncontendedClaimIsOneRoundTrip counts the unary RPCs a claim and a
// release send once the pool's state is cached: one each.
func TestUncontendedClaimIsOneRoundTrip(t *testing.T) {
	var calls atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{sharedEndpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c := newCoordOn(t, cli, coordinator.WithPrefix("/roundtrip"))
	ctx := ctxT(t, 20*time.Second)
	createPool(t, c, "p", coordinator.PoolSpec{Capacity: 8})
	s := newSession(t, cli, 30*time.Second)
	first, err := c.Claim(ctx, s, "p") // reads the pool once, then claims
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		before := calls.Load()
		cl, err := c.Claim(ctx, s, "p")
		if err != nil {
			t.Fatal(err)
		}
		claimCalls := calls.Load() - before
		if err := cl.Release(ctx); err != nil {
			t.Fatal(err)
		}
		releaseCalls := calls.Load() - before - claimCalls
		if claimCalls != 1 || releaseCalls != 1 {
			t.Fatalf("cycle %d: claim took %d RPCs, release %d; want 1 each", i, claimCalls, releaseCalls)
		}
	}
}
