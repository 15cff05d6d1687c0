//go:build unix

package cli

import (
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRunSeatLost takes the seat away while the command runs, in every way
// a seat can be lost, and checks that the command's whole process group is
// stopped, that run exits 7 with one line saying why, and that nothing is
// left bound to its session.
func TestRunSeatLost(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 4})
	agent := h.session(10 * time.Second)
	ctx := testkit.Ctx(t, 60*time.Second)
	if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1", Seats: 4}); err != nil {
		t.Fatal(err)
	}
	before := h.leases(t)
	// The shell's own "Terminated" notices go to a file: stderr must hold
	// poolctl's one line only.
	traps := `exec 2>"$D/stderr"; trap 'echo term > "$D/term"; exit 143' TERM; ` + loop
	tests := []struct {
		name   string
		flags  []string
		script string
		take   func(t *testing.T, s coordinator.Seat)
		why    string // in the message
	}{
		{"force-released with token", nil, traps, func(t *testing.T, s coordinator.Seat) {
			h.run("release", "p", itoa(s.Seat), "--token", itoa64(s.Token), "--reason", "stuck").want(t, ExitOK)
		}, "seat force-released: by"},
		{"lease revoked", nil, traps, func(t *testing.T, s coordinator.Seat) {
			etcdtest.Revoke(t, h.cli, s.Lease)
		}, "session expired"},
		{"instance gone", []string{"--instance", "node-1"}, traps, func(t *testing.T, s coordinator.Seat) {
			if err := h.c.DeregisterInstance(ctx, "p", "node-1"); err != nil {
				t.Fatal(err)
			}
		}, "instance gone: node-1"},
		{"ignores SIGTERM", []string{"--kill-grace", "300ms"}, `exec 2>"$D/stderr"; trap '' TERM; ` + loop, func(t *testing.T, s coordinator.Seat) {
			h.run("release", "p", itoa(s.Seat), "--force").want(t, ExitOK)
		}, "sent SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, inv := t.TempDir(), newInvocation()
			holder := strings.ReplaceAll(tt.name, " ", "-")
			wait := h.runChild(t, inv, dir, append([]string{"p", "--holder", holder}, tt.flags...), tt.script)
			waitFile(t, filepath.Join(dir, "ready"))
			tt.take(t, h.heldBy(t, "p", holder))
			start := time.Now()
			r := wait()
			r.want(t, ExitSeatLost)
			if !strings.Contains(r.err, tt.why) {
				t.Errorf("stderr %q does not say %q", r.err, tt.why)
			}
			if tt.script == traps && !exists(filepath.Join(dir, "term")) {
				t.Error("the command did not get SIGTERM")
			}
			if strings.Contains(tt.name, "SIGTERM") && time.Since(start) < 300*time.Millisecond {
				t.Errorf("SIGKILL came %v after the loss, before --kill-grace", time.Since(start))
			}
			if got := h.leases(t); len(got) != len(before) {
				t.Errorf("leases after run %v, want %v", got, before)
			}
		})
		if tt.name == "instance gone" { // put it back for the next case
			if _, err := h.c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "node-1", Seats: 4}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRunStopsGrandchildren checks that the whole process group goes: after
// a forced release, and after the command exits leaving a child behind.
func TestRunStopsGrandchildren(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2})
	t.Run("seat lost", func(t *testing.T) {
		dir, inv := t.TempDir(), newInvocation()
		wait := h.runChild(t, inv, dir, []string{"p", "--holder", "forker"}, `sleep 300 & echo $! > "$D/pid"; wait`)
		pid := readPid(t, filepath.Join(dir, "pid"))
		h.run("release", "p", itoa(h.heldBy(t, "p", "forker").Seat), "--force").want(t, ExitOK)
		wait().want(t, ExitSeatLost)
		testkit.Eventually(t, 5*time.Second, "grandchild to go", func() bool { return testkit.PidGone(pid) })
	})
	t.Run("command exited leaving a setsid'd child", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("only Linux's guard finds processes that left the process group")
		}
		dir, inv := t.TempDir(), newInvocation()
		r := h.runChild(t, inv, dir, []string{"p"}, `setsid sh -c 'echo $$ > "$D/pid"; exec sleep 300' & while [ ! -s "$D/pid" ]; do sleep 0.01; done; exit 0`)()
		r.want(t, ExitOK)
		if pid := readPid(t, filepath.Join(dir, "pid")); !testkit.PidGone(pid) {
			t.Errorf("the command's setsid'd child %d still runs after run returned", pid)
		}
	})
	t.Run("command exited", func(t *testing.T) {
		dir, inv := t.TempDir(), newInvocation()
		r := h.runChild(t, inv, dir, []string{"p"}, `sleep 300 & echo $! > "$D/pid"; exit 0`)()
		r.want(t, ExitOK)
		if pid := readPid(t, filepath.Join(dir, "pid")); !testkit.PidGone(pid) {
			t.Errorf("the command's background child %d still runs after run returned", pid)
		}
	})
}
