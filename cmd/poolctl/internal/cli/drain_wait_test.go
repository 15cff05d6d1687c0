package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestDrainWait drains an instance with a seat held on it: --wait gives up
// after --timeout with exit 6 (the instance stays draining), and returns 0
// once the seat is released.
func TestDrainWait(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 4})
	agent := h.session(10 * time.Second)
	for _, id := range []string{"node-1", "node-2"} {
		if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "p", agent.Lease(), coordinator.Instance{ID: id, Seats: 2}); err != nil {
			t.Fatal(err)
		}
	}
	cl := h.claim("p", coordinator.WithInstance("node-1"))
	_ = h.claim("p", coordinator.WithInstance("node-2")) // held elsewhere: does not count

	h.run("drain", "p", "node-1", "--timeout", "1s").want(t, ExitUsage)
	start := time.Now()
	r := h.run("drain", "p", "node-1", "--wait", "--timeout", "500ms")
	r.want(t, ExitTimeout)
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("gave up after %v, before --timeout", took)
	}
	if !strings.Contains(r.err, "still has 1 held seat(s) after --timeout 500ms") {
		t.Errorf("stderr %q", r.err)
	}
	if state := h.instanceState(t, "p", "node-1"); state != coordinator.InstanceDraining {
		t.Fatalf("after a timed-out wait the instance is %s, want draining", state)
	}

	inv := newInvocation()
	wait := h.start(inv, "drain", "p", "node-1", "--wait")
	testkit.Consistently(t, 500*time.Millisecond, "drain --wait to wait while the seat is held", func() bool { return inv.out.String() == "" })
	if err := cl.Release(testkit.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	r = wait()
	r.want(t, ExitOK)
	if want := "instance \"node-1\" of pool \"p\" is draining; no seat is held on it\n"; r.out != want {
		t.Errorf("stdout %q, want %q", r.out, want)
	}
	if took := time.Since(released); took > 5*time.Second {
		t.Errorf("drain --wait returned %v after the release", took)
	}
}

// instanceState reads one instance's state.
func (h *harness) instanceState(t *testing.T, pool, id string) coordinator.InstanceState {
	t.Helper()
	all, err := h.c.Instances(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range all {
		if in.ID == id {
			return in.State
		}
	}
	t.Fatalf("no instance %s", id)
	return ""
}
