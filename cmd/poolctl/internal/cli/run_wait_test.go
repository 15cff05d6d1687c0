//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestRunWaiting(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	blocker := h.claim("p", coordinator.WithHolder("blocker"))
	ctx := testkit.Ctx(t, 60*time.Second)
	before := h.leases(t)
	emptyQueue := func(t *testing.T) {
		t.Helper()
		if ws, err := h.c.Queue(ctx, "p"); err != nil || len(ws) != 0 {
			t.Errorf("queue after run: %+v %v, want empty", ws, err)
		}
		if got := h.leases(t); len(got) != len(before) {
			t.Errorf("leases after run %v, want %v", got, before)
		}
	}
	t.Run("--wait runs out", func(t *testing.T) {
		dir := t.TempDir()
		r := h.runChild(t, newInvocation(), dir, []string{"p", "--wait", "300ms"}, `touch "$D/ran"`)()
		r.want(t, ExitTimeout)
		if exists(filepath.Join(dir, "ran")) {
			t.Error("the command ran without a seat")
		}
		emptyQueue(t)
	})
	t.Run("--no-wait", func(t *testing.T) {
		h.runChild(t, newInvocation(), t.TempDir(), []string{"p", "--no-wait"}, `true`)().want(t, ExitTimeout)
		emptyQueue(t)
	})
	t.Run("interrupted while waiting", func(t *testing.T) {
		inv := newInvocation()
		wait := h.runChild(t, inv, t.TempDir(), []string{"p"}, `true`)
		testkit.Eventually(t, 10*time.Second, "waiter", func() bool { ws, _ := h.c.Queue(ctx, "p"); return len(ws) == 1 })
		inv.sigs.send(t, os.Interrupt)
		wait().want(t, ExitInterrupted)
		emptyQueue(t)
	})
	t.Run("waits as long as it takes", func(t *testing.T) {
		dir := t.TempDir()
		wait := h.runChild(t, newInvocation(), dir, []string{"p"}, `touch "$D/ran"`)
		testkit.Eventually(t, 10*time.Second, "waiter", func() bool { ws, _ := h.c.Queue(ctx, "p"); return len(ws) == 1 })
		if exists(filepath.Join(dir, "ran")) {
			t.Fatal("the command ran before a seat was free")
		}
		if err := blocker.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wait().want(t, ExitOK)
		if !exists(filepath.Join(dir, "ran")) {
			t.Error("the command did not run")
		}
	})
}

func TestRunUsage(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"no dash", []string{"p", "true"}, ExitUsage},
		{"no command", []string{"p", "--"}, ExitUsage},
		{"no pool", []string{"--", "true"}, ExitUsage},
		{"two pools", []string{"p", "q", "--", "true"}, ExitUsage},
		{"bad drain signal", []string{"p", "--drain-signal", "BOGUS", "--", "true"}, ExitUsage},
		{"bad label", []string{"p", "--label", "zone", "--", "true"}, ExitUsage},
		{"ttl below minimum", []string{"p", "--ttl", "1s", "--", "true"}, ExitUsage},
		{"negative wait", []string{"p", "--wait=-1s", "--", "true"}, ExitUsage},
		{"wait and no-wait", []string{"p", "--wait", "1s", "--no-wait", "--", "true"}, ExitUsage},
		{"zero kill grace", []string{"p", "--kill-grace", "0s", "--", "true"}, ExitUsage},
		{"bad tenant", []string{"p", "--tenant", "a b", "--", "true"}, ExitUsage},
		{"unknown pool", []string{"nope", "--", "true"}, ExitNotFound},
		{"unknown instance, no wait", []string{"p", "--instance", "node-9", "--no-wait", "--", "true"}, ExitNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.run(append([]string{"run"}, tt.args...)...).want(t, tt.code)
		})
	}
}
