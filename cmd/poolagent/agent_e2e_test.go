package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// agentTTL is the agent's lease TTL: etcd's minimum.
const agentTTL = 2 * time.Second

// twoInstances registers i1 and i2, one seat each, in pool p.
const twoInstances = `
agent:
  instances:
    - {pool: p, id: i1, address: "127.0.0.1:9001", labels: {zone: a}}
    - {pool: p, id: i2, address: "127.0.0.1:9002", labels: {zone: b}}
`

type agentProc struct {
	*proc
	url string
}

// startAgent runs `poolagent serve` with the YAML config against endpoint
// and waits until it is ready.
func startAgent(t *testing.T, endpoint, yaml string, extra ...string) *agentProc {
	t.Helper()
	listen := testkit.FreeAddr(t)
	args := append([]string{"serve", "--config", testkit.WriteFile(t, "agent.yaml", yaml), "--endpoints", endpoint,
		"--listen", listen, "--ttl", agentTTL.String(), "--dial-timeout", "1s", "--log-level", "debug"}, extra...)
	a := &agentProc{proc: startProc(t, "agent", args...), url: "http://" + listen}
	testkit.Eventually(t, 15*time.Second, "agent ready", func() bool {
		if a.exited() {
			t.Fatalf("agent exited with %d:\n%s", a.exitCode, a.stderr.String())
		}
		return httpStatus(a.url+agent.ReadyzPath) == http.StatusOK
	})
	return a
}

func claimOn(t *testing.T, co *coordinator.Coordinator, sess *coordinator.Session, pool, instance string) *coordinator.Claim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := co.Claim(ctx, sess, pool, coordinator.WithInstance(instance), coordinator.WithHolder("test-"+instance))
	if err != nil {
		t.Fatalf("claim on %s: %v", instance, err)
	}
	return cl
}

func TestAgentSIGKILLInstancesVanishAndClaimsSeeInstanceGone(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2, RequireInstance: true})
	a := startAgent(t, c.Endpoint(0), twoInstances)
	cl := claimOn(t, co, testkit.Session(t, cli, coordinator.MinTTL), "p", "i1")
	done := cl.Done()
	start := time.Now()
	a.signal(t, syscall.SIGKILL)
	gone := testkit.Eventually(t, 10*time.Second, "instances gone", func() bool { return len(instances(t, co, "p")) == 0 })
	t.Logf("instances gone %v after SIGKILL", time.Since(start))
	if limit := agentTTL + 1500*time.Millisecond; gone > limit {
		t.Errorf("instances vanished %v after SIGKILL, want <= TTL+1.5s = %v", gone, limit)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("claim bound to a dead agent's instance still held")
	}
	if !errors.Is(cl.Err(), coordinator.ErrInstanceGone) {
		t.Fatalf("claim.Err() = %v, want ErrInstanceGone", cl.Err())
	}
}

func TestAgentDrainOnSIGTERM(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2, RequireInstance: true})

	t.Run("exits once holders release", func(t *testing.T) {
		a := startAgent(t, c.Endpoint(0), twoInstances, "--drain-timeout", "20s")
		cl := claimOn(t, co, testkit.Session(t, cli, coordinator.MinTTL), "p", "i1")
		a.signal(t, syscall.SIGTERM)
		waitDraining(t, co, a)
		assertNoNewClaims(t, co, testkit.Session(t, cli, coordinator.MinTTL))
		if a.exited() {
			t.Fatalf("agent exited with %d while a seat was held on its instance", a.exitCode)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cl.Release(ctx); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		if code := a.wait(t, 5*time.Second); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		t.Logf("agent exited %v after the last release", time.Since(released))
		if n := len(instances(t, co, "p")); n != 0 {
			t.Errorf("%d instances left after the drain", n)
		}
	})
	t.Run("exits at the drain timeout", func(t *testing.T) {
		a := startAgent(t, c.Endpoint(0), twoInstances, "--drain-timeout", "1s")
		cl := claimOn(t, co, testkit.Session(t, cli, coordinator.MinTTL), "p", "i2")
		done := cl.Done()
		start := time.Now()
		a.signal(t, syscall.SIGTERM)
		if code := a.wait(t, 6*time.Second); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		if took := time.Since(start); took < time.Second {
			t.Errorf("agent exited %v after SIGTERM, before its 1s drain timeout", took)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("claim still held after the drained agent left")
		}
		if !errors.Is(cl.Err(), coordinator.ErrInstanceGone) {
			t.Errorf("claim.Err() = %v, want ErrInstanceGone", cl.Err())
		}
	})
}

// TestAgentDrainOnSIGHUP: SIGHUP (a closed terminal, or a kill -HUP meant
// as a reload) stops the agent as SIGTERM does: it drains, and exits 0 once
// the holder releases. Found by a review (2026-12-05): Go's default for
// SIGHUP ended the process at once, its instances left registered.
func TestAgentDrainOnSIGHUP(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2, RequireInstance: true})
	a := startAgent(t, c.Endpoint(0), twoInstances, "--drain-timeout", "20s")
	cl := claimOn(t, co, testkit.Session(t, cli, coordinator.MinTTL), "p", "i1")
	a.signal(t, syscall.SIGHUP)
	waitDraining(t, co, a)
	if a.exited() {
		t.Fatalf("agent exited with %d on SIGHUP while a seat was held on its instance", a.exitCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, 5*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGHUP, want 0", code)
	}
	if n := len(instances(t, co, "p")); n != 0 {
		t.Errorf("%d instances left after the drain", n)
	}
}

// TestAgentNohupIgnoresSIGHUP: an agent started with SIGHUP ignored
// (`nohup poolagent serve &`, a daemon wrapper) keeps ignoring it, as
// before SIGHUP stopped it. Found by a review (2026-12-05).
func TestAgentNohupIgnoresSIGHUP(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2, RequireInstance: true})
	wrapper := filepath.Join(t.TempDir(), "nohup.sh")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\ntrap '' HUP\nexec "+binPath+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := binPath
	binPath = wrapper // startAgent runs binPath
	a := startAgent(t, c.Endpoint(0), twoInstances)
	binPath = saved
	a.signal(t, syscall.SIGHUP)
	testkit.Consistently(t, 2*time.Second, "the agent to run on, its instances registered, after an ignored SIGHUP", func() bool {
		return !a.exited() && len(instances(t, co, "p")) == 2
	})
}

func waitDraining(t *testing.T, co *coordinator.Coordinator, a *agentProc) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "instances draining", func() bool {
		ins := instances(t, co, "p")
		for _, in := range ins {
			if in.State != coordinator.InstanceDraining {
				return false
			}
		}
		return len(ins) == 2
	})
	if code := httpStatus(a.url + agent.ReadyzPath); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d while draining, want 503", code)
	}
}

// assertNoNewClaims checks that a claim lands on no draining instance,
// whether it asks for one by name or waits for any.
func assertNoNewClaims(t *testing.T, co *coordinator.Coordinator, sess *coordinator.Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range []string{"i1", "i2"} {
		if cl, err := co.Claim(ctx, sess, "p", coordinator.WithInstance(id)); !errors.Is(err, coordinator.ErrNoSeat) {
			t.Fatalf("claim on draining %s: %v, %v; want ErrNoSeat", id, cl, err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer wcancel()
	if cl, err := co.Claim(wctx, sess, "p", coordinator.WithWait()); err == nil {
		t.Fatalf("waiting claim granted seat %d on %v while every instance drains", cl.Seat(), fmt.Sprint(cl.Instance()))
	}
}
