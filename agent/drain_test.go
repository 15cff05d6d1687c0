package agent

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestDrainPollCostIndependentOfPoolSize: a draining agent polls the
// seats held on its instances every poll interval, for up to its drain
// timeout. Each poll must read those instances, not the whole pool: it
// read every key of the pool twice (and up to 64 lease TTLs), so an agent
// with one instance in a pool of 10,000 held seats read megabytes a
// second from etcd while it drained. Here another agent's instance holds
// 200 seats; the drain's reads over a second must stay small.
func TestDrainPollCostIndependentOfPoolSize(t *testing.T) {
	c, cli, co := setup(t)
	var counting atomic.Bool
	var replied atomic.Int64
	ic := func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, m, req, reply, cc, opts...)
		if counting.Load() {
			msg, ok := reply.(proto.Message)
			if !ok {
				panic(fmt.Sprintf("%s: a reply of type %T is not a proto.Message", m, reply))
			}
			replied.Add(int64(proto.Size(msg)))
		}
		return err
	}
	aco := testkit.Coordinator(t, testkit.DialedClient(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(ic)))
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.Pools[0].Capacity = 300
	cfg.DrainTimeout = config.Duration(20 * time.Second)
	a, stop := startAgent(t, aco, "test", cfg)
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })

	ctx := testkit.Ctx(t, 60*time.Second)
	other, holders := testkit.Session(t, cli, 30*time.Second), testkit.Session(t, cli, 30*time.Second)
	if _, err := co.RegisterInstance(ctx, "p", other.Lease(), coordinator.Instance{ID: "big", Seats: 200}); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		testkit.Claim(t, co, holders, "p", coordinator.WithInstance("big"))
	}
	cl := testkit.Claim(t, co, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithInstance("i1"))

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	testkit.Eventually(t, 5*time.Second, "i1 draining", func() bool {
		return instanceMap(t, co)["i1"].State == coordinator.InstanceDraining
	})
	counting.Store(true)
	time.Sleep(time.Second) // some 20 polls, at 50 ms
	counting.Store(false)
	select {
	case err := <-stopped:
		t.Fatalf("the drain ended with a seat held on i1: %v", err)
	default:
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// One poll of one instance reads a few hundred bytes; one read of
	// this pool is some 70 KB.
	if n := replied.Load(); n > 32<<10 {
		t.Errorf("the draining agent read %d bytes from etcd in a second of polls", n)
	}
	t.Logf("%d bytes read in a second of polls", replied.Load())
}

// TestDrainEndsWhenPoolDeleted: a pool deleted while its agent drains went
// with its seats, so the drain has nothing left to wait for. It waited for
// its whole timeout, warning at each poll that it could not count them.
func TestDrainEndsWhenPoolDeleted(t *testing.T) {
	_, cli, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.DrainTimeout = config.Duration(20 * time.Second)
	a, stop := startAgent(t, co, "test", cfg)
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	testkit.Claim(t, co, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithInstance("i1"))
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	testkit.Eventually(t, 5*time.Second, "i1 draining", func() bool {
		return instanceMap(t, co)["i1"].State == coordinator.InstanceDraining
	})
	ctx := testkit.Ctx(t, 10*time.Second)
	if err := co.DeletePool(ctx, "p", true); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("3 s after its pool was deleted, the agent still drains")
	}
}
