package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestPermissionDeniedDrains: the agent holds p/i1, with a holder, and
// q/i2. Its write permission on pool q is taken away while it runs, and
// q/i2 is deleted: registering it again is refused for good, and Run
// stops with that error. It must stop as on shutdown: drain first, so that
// the holder on p/i1, an instance nothing is wrong with, keeps its seat
// for the drain timeout. Found by a review (2026-12-05): Run revoked its
// lease at once, and the holder lost its seat within milliseconds.
func TestPermissionDeniedDrains(t *testing.T) {
	c, cli, _ := setup(t)
	root := etcdtest.EnableAuth(t, cli)
	rco := testkit.Coordinator(t, root)
	testkit.CreatePool(t, rco, "p", coordinator.PoolSpec{Capacity: 2})
	testkit.CreatePool(t, rco, "q", coordinator.PoolSpec{Capacity: 2})
	pre := coordinator.DefaultPrefix
	etcdtest.AddPrefixRole(t, root, "r-all", pre, clientv3.PermissionType(clientv3.PermRead))
	etcdtest.AddPrefixRole(t, root, "r-p", pre+"/pools/p/", clientv3.PermissionType(clientv3.PermReadWrite))
	etcdtest.AddPrefixRole(t, root, "r-q", pre+"/pools/q/", clientv3.PermissionType(clientv3.PermReadWrite))
	etcdtest.AddUser(t, root, "agent", "pw", "r-all", "r-p", "r-q")
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"}, config.Instance{Pool: "q", ID: "i2"})
	cfg.Pools = append(cfg.Pools, config.Pool{Name: "q", Capacity: 2})
	cfg.DrainTimeout, cfg.TTL = config.Duration(5*time.Second), config.Duration(10*time.Second)
	_, done := runAs(t, c, cfg)
	cl := testkit.Claim(t, rco, testkit.Session(t, root, 10*time.Second), "p", coordinator.WithInstance("i1"))
	rctx, rcancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer rcancel()
	if _, err := root.UserRevokeRole(rctx, "agent", "r-q"); err != nil {
		t.Fatal(err)
	}
	if err := rco.DeregisterInstance(rctx, "q", "i2"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "p/i1 draining", func() bool {
		ins, err := rco.Instances(rctx, "p")
		return err == nil && len(ins) == 1 && ins[0].State == coordinator.InstanceDraining
	})
	select {
	case <-cl.Done():
		t.Errorf("the holder on p/i1 lost its seat before the drain timeout: %v", cl.Err())
	case <-time.After(time.Second):
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("Run: %v; want the refusal", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the drain timeout")
	}
}

// TestDrainBoundedWithEtcdUnreachable: an agent whose etcd stops
// answering as it stops drains within the drain timeout and a few request
// timeouts, however many instances it has: it marks, and then
// deregisters, its instances at once, not one after another. Found by a
// review (2026-12-05): 4 instances took 20 s with a drain timeout of 1 s,
// about two request timeouts each.
func TestDrainBoundedWithEtcdUnreachable(t *testing.T) {
	c, _, _ := setup(t)
	px := etcdtest.NewProxy(t, c.Endpoint(0))
	aco := testkit.Coordinator(t, testkit.Client(t, px.URL()))
	var ins []config.Instance
	for i := range 8 {
		ins = append(ins, config.Instance{Pool: "p", ID: fmt.Sprintf("i%d", i)})
	}
	cfg := agentConfig(ins...)
	cfg.TTL, cfg.DrainTimeout = config.Duration(30*time.Second), config.Duration(time.Second)
	a := New(aco, cfg, WithPollInterval(50*time.Millisecond))
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- a.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	px.Blackhole()
	start := time.Now()
	cancel()
	<-done
	// mark, the drain timeout, deregister, revoke: a request timeout (2 s)
	// each but the drain timeout, and a poll that began before it ended.
	if took, bound := time.Since(start), cfg.DrainTimeout.D()+4*2*time.Second; took > bound {
		t.Errorf("drain of %d instances with etcd unreachable took %v; want at most %v", len(ins), took, bound)
	}
}

// TestReadDeniedStops: the agent's read permission on its pool is taken
// away while it runs, so every owner check is refused for good. It must
// stop with that refusal, draining first, as on a refused write; not
// retry for ever while /readyz says it keeps its instances registered.
// Found by a review (2026-12-05).
func TestReadDeniedStops(t *testing.T) {
	c, cli, _ := setup(t)
	root := etcdtest.EnableAuth(t, cli)
	rco := testkit.Coordinator(t, root)
	testkit.CreatePool(t, rco, "p", coordinator.PoolSpec{Capacity: 2})
	pre := coordinator.DefaultPrefix
	etcdtest.AddPrefixRole(t, root, "r-all", pre, clientv3.PermissionType(clientv3.PermRead))
	etcdtest.AddPrefixRole(t, root, "w-p", pre+"/pools/p/", clientv3.PermissionType(clientv3.PermWrite))
	etcdtest.AddUser(t, root, "agent", "pw", "r-all", "w-p")
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.Pools = nil
	cfg.DrainTimeout, cfg.TTL = config.Duration(time.Second), config.Duration(10*time.Second)
	a, done := runAs(t, c, cfg, WithOwnerCheckInterval(100*time.Millisecond))
	rctx, rcancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer rcancel()
	if _, err := root.UserRevokeRole(rctx, "agent", "r-all"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "read") {
			t.Errorf("Run: %v; want the read's refusal", err)
		}
	case <-time.After(8 * time.Second):
		st := a.Status()
		t.Errorf("8 s after its read permission went, Run still runs (registered %v)", st.Registered)
	}
}

// TestAuthFailedStops: the agent's etcd user is deleted while it runs,
// then its lease is lost: granting a new one fails with "authentication
// failed", for good. Run must stop with that error, not retry for ever.
// Found by a review (2026-12-05): openSession retried it.
func TestAuthFailedStops(t *testing.T) {
	c, cli, _ := setup(t)
	root := etcdtest.EnableAuth(t, cli)
	rco := testkit.Coordinator(t, root)
	testkit.CreatePool(t, rco, "p", coordinator.PoolSpec{Capacity: 2})
	etcdtest.AddPrefixRole(t, root, "rw", coordinator.DefaultPrefix, clientv3.PermissionType(clientv3.PermReadWrite))
	etcdtest.AddUser(t, root, "agent", "pw", "rw")
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.Pools = nil
	cfg.DrainTimeout = config.Duration(time.Second)
	a, done := runAs(t, c, cfg)
	rctx, rcancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer rcancel()
	if _, err := root.UserDelete(rctx, "agent"); err != nil {
		t.Fatal(err)
	}
	etcdtest.Revoke(t, root, a.Status().Lease)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "authentication failed") {
			t.Errorf("Run: %v; want the authentication failure", err)
		}
	case <-time.After(8 * time.Second):
		t.Error("8 s after its user was deleted and its lease lost, Run still runs")
	}
}

// TestZeroDrainTimeoutNoSpuriousWarning: poolagent dev runs its agent
// with a drain timeout of 0 (Ctrl-C deregisters at once). Its drain must
// not warn that it cannot list seats while etcd answers: it read them with
// a deadline already passed. Found by a review (2026-12-05).
func TestZeroDrainTimeoutNoSpuriousWarning(t *testing.T) {
	_, _, co := setup(t)
	var buf testkit.SyncBuffer
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.DrainTimeout = 0
	a, stop := startAgent(t, co, "test", cfg, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "level=WARN") {
		t.Errorf("a drain with etcd up warned:\n%s", buf.String())
	}
}

// runAs runs an agent of cfg as the etcd user "agent" (password "pw"),
// polling every 50 ms, until the test ends, and returns it once it has
// registered its instances, with the channel Run's result arrives on.
func runAs(t *testing.T, c *etcdtest.Cluster, cfg config.Agent, opts ...Option) (*Agent, <-chan error) {
	t.Helper()
	aco := testkit.Coordinator(t, etcdtest.UserClient(t, c.Endpoints(), "agent", "pw"))
	a := New(aco, cfg, append([]Option{WithPollInterval(50 * time.Millisecond)}, opts...)...)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { done <- a.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	return a, done
}
