package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/roles"
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
	stoppedWithin(t, stopped, 3*time.Second, "its pool was deleted")
}

// stoppedWithin fails the test unless Run's result arrives on stopped,
// nil, within d of what happened.
func stoppedWithin(t *testing.T, stopped <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		t.Fatalf("%v after %s, the agent still drains", d, what)
	}
}

// TestDrainUnderAgentRole: the agent under exactly its documented role
// (roles.Permissions) reads its epoch and counts the seats held on its
// instances while it drains: it waits while one is held, and ends once it
// is released, with no read refused.
func TestDrainUnderAgentRole(t *testing.T) {
	c, cli, _ := setup(t)
	root := etcdtest.EnableAuth(t, cli)
	rco := testkit.Coordinator(t, root)
	testkit.CreatePool(t, rco, "p", coordinator.PoolSpec{Capacity: 2})
	ctx := testkit.Ctx(t, 30*time.Second)
	name := roles.Name(coordinator.DefaultPrefix, "p", roles.Agent)
	if err := roles.Apply(ctx, root, name, roles.Permissions(coordinator.DefaultPrefix, "p", roles.Agent)); err != nil {
		t.Fatal(err)
	}
	etcdtest.AddUser(t, root, "agent", "pw", name)
	var buf testkit.SyncBuffer
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.Pools = nil
	cfg.DrainTimeout = config.Duration(10 * time.Second)
	aco := testkit.Coordinator(t, etcdtest.UserClient(t, c.Endpoints(), "agent", "pw"))
	a, stop := startAgent(t, aco, "test", cfg, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	cl := testkit.Claim(t, rco, testkit.Session(t, root, 30*time.Second), "p", coordinator.WithInstance("i1"))
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("the drain ended with a seat held on i1: %v", err)
	case <-time.After(time.Second):
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	stoppedWithin(t, stopped, 3*time.Second, "the release")
	if strings.Contains(buf.String(), "cannot count") || strings.Contains(buf.String(), "denied") {
		t.Errorf("the agent's log:\n%s", buf.String())
	}
}

// TestDrainOnLowMaxTxnOps: an agent of 8 instances, none held, on an etcd
// whose --max-txn-ops is 16, drains at once. Found by a review
// (2026-12-05): each poll's txn of 17 operations was refused, and the
// drain waited its whole timeout.
func TestDrainOnLowMaxTxnOps(t *testing.T) {
	url := etcdtest.StartMaxTxnOps(t, 16)
	co := testkit.Coordinator(t, testkit.Client(t, url))
	var ins []config.Instance
	for i := range 8 {
		ins = append(ins, config.Instance{Pool: "p", ID: fmt.Sprintf("i%d", i)})
	}
	cfg := agentConfig(ins...)
	cfg.DrainTimeout = config.Duration(5 * time.Second)
	a, stop := startAgent(t, co, "test", cfg)
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a drain with no seat held took %v (drain timeout 5s)", d.Round(time.Millisecond))
	}
}
