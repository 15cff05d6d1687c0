package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRolloutHandsInstancesOver runs what a Deployment's rolling update
// does with the agent manifest: agent A serves i1 and i2 with a holder on
// i1; agent B starts with the same instances and ETCDPOOL_TAKEOVER=true;
// then A gets SIGTERM. The holder must keep its seat (same token, Done
// never closed), A must exit without waiting for it, and the instances
// must stay registered, under B's lease, untouched by A's drain.
func TestRolloutHandsInstancesOver(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2, RequireInstance: true})
	a := startAgent(t, c.Endpoint(0), twoInstances, "--name", "agent-a", "--drain-timeout", "20s")
	cl := claimOn(t, co, testkit.Session(t, cli, coordinator.MinTTL), "p", "i1")
	done := cl.Done()

	t.Setenv("ETCDPOOL_TAKEOVER", "true") // as the manifest sets it
	b := startAgent(t, c.Endpoint(0), twoInstances, "--name", "agent-b")
	ins := instances(t, co, "p")
	if len(ins) != 2 || ins[0].Agent != "agent-b" || ins[1].Agent != "agent-b" || ins[0].Lease != ins[1].Lease {
		t.Fatalf("instances after B turned ready: %+v, want both B's", ins)
	}
	testkit.Eventually(t, 15*time.Second, "A's /readyz to fail", func() bool {
		return httpStatus(a.url+agent.ReadyzPath) == http.StatusServiceUnavailable
	})

	start := time.Now()
	a.signal(t, syscall.SIGTERM)
	if code := a.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("A exit code %d after SIGTERM, want 0", code)
	}
	t.Logf("A exited %v after SIGTERM", time.Since(start))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("A took %v to drain: it waited for a seat on an instance it no longer holds", took)
	}
	after := instances(t, co, "p")
	for i := range after {
		if after[i].Revision != ins[i].Revision || after[i].State != coordinator.InstanceReady {
			t.Errorf("A's drain wrote %s: %+v, was %+v", after[i].ID, after[i], ins[i])
		}
	}
	// A's lease is revoked by now; the claim's monitor reacts to an
	// instance delete within milliseconds.
	testkit.Consistently(t, time.Second, "the holder keeps its seat", func() bool {
		select {
		case <-done:
			return false
		default:
			return true
		}
	})
	s, ok := heldBy(seats(t, co, "p"), "test-i1")
	if !ok || s.Token != cl.Token() || s.Instance != "i1" {
		t.Errorf("holder's seat after A left: %+v (%v), want token %d on i1", s, ok, cl.Token())
	}
	if errs := a.stderr.String(); !strings.Contains(errs, "instance taken over by another agent") {
		t.Errorf("A did not log the takeover:\n%s", errs)
	}
	if errs := b.stderr.String(); !strings.Contains(errs, "taking over instance") || !strings.Contains(errs, "agent-a") {
		t.Errorf("B did not log whom it took the instances from:\n%s", errs)
	}
	if code := httpStatus(b.url + agent.ReadyzPath); code != http.StatusOK {
		t.Errorf("B's /readyz = %d after A left, want 200", code)
	}
}
