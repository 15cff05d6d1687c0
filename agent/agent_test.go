package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
)

// setup starts etcd and a coordinator, and checks for leaked goroutines
// once both are stopped.
func setup(t *testing.T) (*etcdtest.Cluster, *clientv3.Client, *coordinator.Coordinator) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co, err := coordinator.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(co.Close)
	return c, cli, co
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runAgent runs a for cfg until the test ends, then stops it and waits.
func runAgent(t *testing.T, co *coordinator.Coordinator, cfg config.Agent, opts ...Option) *Agent {
	t.Helper()
	a := New(co, cfg, append(opts, WithPollInterval(50*time.Millisecond))...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return a
}

func agentConfig(instances ...config.Instance) config.Agent {
	return config.Agent{Name: "test", TTL: config.Duration(2 * time.Second), Instances: instances,
		Pools: []config.Pool{{Name: "p", Capacity: 2}}}
}

func TestAgentRegistersAgainAfterLeaseRevoked(t *testing.T) {
	_, cli, co := setup(t)
	var lost atomic.Int32
	a := runAgent(t, co, agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2}),
		WithLeaseLostHook(func() { lost.Add(1) }))
	waitFor(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	old := a.Status().Lease
	etcdtest.Revoke(t, cli, old)
	start := time.Now()
	waitFor(t, 5*time.Second, "registered under a new lease", func() bool {
		st := a.Status()
		return st.Registered && st.Lease != old && st.LeaseAlive
	})
	t.Logf("registered again %v after the revoke", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ins, err := co.Instances(ctx, "p")
	if err != nil || len(ins) != 1 || ins[0].Lease != a.Status().Lease || ins[0].Addr != "h:1" || ins[0].Seats != 2 || ins[0].Agent != "test" {
		t.Fatalf("instances %+v, %v", ins, err)
	}
	if lost.Load() != 1 {
		t.Errorf("lease-lost hook called %d times, want 1", lost.Load())
	}
}

func TestAgentWaitsForPoolCreatedLater(t *testing.T) {
	_, _, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"}, config.Instance{Pool: "later", ID: "i2"})
	a := runAgent(t, co, cfg)
	srv := httptest.NewServer(a.Handler(nil))
	defer srv.Close()
	waitFor(t, 10*time.Second, "lease", func() bool { return a.Status().LeaseAlive })
	if code := get(t, srv.URL+ReadyzPath); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d with an instance unregistered, want 503", code)
	}
	if code := get(t, srv.URL+HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := co.CreatePool(ctx, "later", coordinator.PoolSpec{Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "all registered", func() bool { return a.Status().Registered })
	if code := get(t, srv.URL+ReadyzPath); code != http.StatusOK {
		t.Errorf("/readyz = %d once registered, want 200", code)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
