package agent

import (
	"context"
	"fmt"
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
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// setup starts etcd and a coordinator, and checks for leaked goroutines
// once both are stopped.
func setup(t *testing.T) (*etcdtest.Cluster, *clientv3.Client, *coordinator.Coordinator) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	c := etcdtest.Start(t)
	cli := c.Client(t)
	return c, cli, testkit.Coordinator(t, cli)
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
		WithSessionLostHook(func() { lost.Add(1) }))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	old := a.Status().Lease
	etcdtest.Revoke(t, cli, old)
	start := time.Now()
	testkit.Eventually(t, 5*time.Second, "registered under a new lease", func() bool {
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
		t.Errorf("session-lost hook called %d times, want 1", lost.Load())
	}
}

// TestAgentRegistersAgainAfterInstanceDeleted deletes one of the agent's
// instances while its lease lives, through DeregisterInstance as another
// process would and by hand as etcdctl would: the agent must register it
// again under the same lease, and leave the other instance alone.
func TestAgentRegistersAgainAfterInstanceDeleted(t *testing.T) {
	_, cli, co := setup(t)
	a := runAgent(t, co, agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2}, config.Instance{Pool: "p", ID: "i2"}))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	lease := a.Status().Lease
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name   string
		delete func() error
	}{
		{"DeregisterInstance", func() error { return co.DeregisterInstance(ctx, "p", "i1") }},
		{"etcdctl del", func() error {
			_, err := cli.Delete(ctx, coordinator.DefaultPrefix+"/pools/p/instances/i1")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := instanceMap(t, co)
			if err := tc.delete(); err != nil {
				t.Fatal(err)
			}
			took := testkit.Eventually(t, 5*time.Second, "i1 registered again", func() bool {
				in, ok := instanceMap(t, co)["i1"]
				return ok && in.Revision > before["i1"].Revision
			})
			t.Logf("registered again %v after the delete", took)
			after := instanceMap(t, co)
			if in := after["i1"]; in.Lease != lease || in.Addr != "h:1" || in.Seats != 2 || in.State != coordinator.InstanceReady {
				t.Errorf("i1 registered again as %+v, want lease %x, h:1, 2 seats, ready", in, lease)
			}
			if after["i2"].Revision != before["i2"].Revision {
				t.Errorf("i2 was written again (revision %d -> %d) though nobody deleted it", before["i2"].Revision, after["i2"].Revision)
			}
			// Status follows the register txn's reply, which may come after
			// the key is visible in etcd.
			testkit.Eventually(t, 2*time.Second, fmt.Sprintf("status registered under lease %x", lease), func() bool {
				st := a.Status()
				return st.Registered && st.Lease == lease
			})
		})
	}
}

// TestAgentLeavesInstanceDeletedWhileDraining deletes an instance while
// the agent drains: re-registering it would undo the drain.
func TestAgentLeavesInstanceDeletedWhileDraining(t *testing.T) {
	_, cli, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"}, config.Instance{Pool: "p", ID: "i2"})
	cfg.DrainTimeout = config.Duration(20 * time.Second)
	a := New(co, cfg, WithPollInterval(50*time.Millisecond))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	cl := testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithInstance("i1"))
	stop() // the held seat keeps the drain going
	testkit.Eventually(t, 5*time.Second, "instances draining", func() bool {
		ins := instanceMap(t, co)
		return ins["i1"].State == coordinator.InstanceDraining && ins["i2"].State == coordinator.InstanceDraining
	})
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := co.DeregisterInstance(rctx, "p", "i2"); err != nil {
		t.Fatal(err)
	}
	// A lone deletion is repaired within a few hundred milliseconds when
	// the agent is not draining (see the test above).
	testkit.Consistently(t, time.Second, "i2 deleted", func() bool {
		_, ok := instanceMap(t, co)["i2"]
		return !ok
	})
	if err := cl.Release(rctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ins := instanceMap(t, co); len(ins) != 0 {
		t.Errorf("instances left after the drain: %+v", ins)
	}
}

// instanceMap lists pool p's instances by ID.
func instanceMap(t *testing.T, co *coordinator.Coordinator) map[string]coordinator.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	ins, err := co.Instances(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]coordinator.Instance{}
	for _, in := range ins {
		out[in.ID] = in
	}
	return out
}

func TestAgentWaitsForPoolCreatedLater(t *testing.T) {
	_, _, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"}, config.Instance{Pool: "later", ID: "i2"})
	a := runAgent(t, co, cfg)
	srv := httptest.NewServer(a.Handler(nil))
	defer srv.Close()
	testkit.Eventually(t, 10*time.Second, "lease", func() bool { return a.Status().LeaseAlive })
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
	testkit.Eventually(t, 10*time.Second, "all registered", func() bool { return a.Status().Registered })
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

// TestAgentKeepsUnknownState: a newer etcdpool writes a state this version
// does not know on the agent's instance, keeping the agent's lease (as
// poolctl drain does). The agent must leave it as it is: claims of this
// version do not bind to it, and its writer meant it. Found by a review
// (2026-12-05): once GetInstance judged values, the agent took it for
// corrupt and wrote the instance back as ready within its owner check.
func TestAgentKeepsUnknownState(t *testing.T) {
	_, cli, co := setup(t)
	a := runAgent(t, co, agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1"}), WithOwnerCheckInterval(100*time.Millisecond))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	ctx := testkit.Ctx(t, 10*time.Second)
	key := coordinator.SegPrefix(co.Prefix(), "p", coordinator.SegInstances) + "i1"
	for _, newer := range []string{
		`{"id":"i1","addr":"h:1","seats":1,"state":"cordoned","agent":"test"}`,    // a state it does not know
		`{"id":"i1","addr":"h:1","seats":1,"state":"ready","started":1733400000}`, // a field whose type changed
	} {
		if _, err := cli.Put(ctx, key, newer, clientv3.WithIgnoreLease()); err != nil {
			t.Fatal(err)
		}
		testkit.Consistently(t, 2*time.Second, "the newer write left as it is", func() bool {
			r, err := cli.Get(ctx, key)
			return err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == newer
		})
	}
}
