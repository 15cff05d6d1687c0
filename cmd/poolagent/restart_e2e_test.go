package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestAgentReregistersAfterEtcdRestart stops the only etcd member for
// longer than the agent's TTL, so that the agent's session is lost, then
// restarts it: the agent must register its instances again under a new
// lease within a few seconds, with no operator action.
func TestAgentReregistersAfterEtcdRestart(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	a := startAgent(t, c.Endpoint(0), twoInstances)
	oldLease := instances(t, co, "p")[0].Lease

	c.Stop(0)
	// The outage must outlast the agent's lease: wait until the agent says
	// its lease is gone.
	testkit.Eventually(t, 10*time.Second, "agent to report its lease lost", func() bool {
		return httpStatus(a.url+agent.HealthzPath) == http.StatusServiceUnavailable &&
			strings.Contains(a.stderr.String(), "lease lost")
	})
	c.Restart(t, 0)
	back := time.Now()
	took := testkit.Eventually(t, 15*time.Second, "instances under a new lease", func() bool {
		return registeredUnderNewLease(co, oldLease)
	})
	t.Logf("instances re-registered %v after etcd returned", took)
	if took > 5*time.Second {
		t.Errorf("instances back %v after etcd returned, want a few seconds (<= 5s)", took)
	}
	// The old lease, refreshed by the restart, must expire without taking
	// the re-registered instances with it.
	testkit.Eventually(t, 10*time.Second, "old lease expired", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := cli.TimeToLive(ctx, oldLease)
		return err == nil && r.TTL == -1
	})
	if !registeredUnderNewLease(co, oldLease) {
		t.Fatalf("instances lost with the old lease: %+v", instances(t, co, "p"))
	}
	if code := httpStatus(a.url + agent.HealthzPath); code != http.StatusOK {
		t.Errorf("/healthz = %d after recovery (back %v ago)", code, time.Since(back))
	}
}

func registeredUnderNewLease(co *coordinator.Coordinator, old clientv3.LeaseID) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ins, err := co.Instances(ctx, "p")
	if err != nil || len(ins) != 2 {
		return false
	}
	for _, in := range ins {
		if in.Lease == old || in.State != coordinator.InstanceReady {
			return false
		}
	}
	return true
}
