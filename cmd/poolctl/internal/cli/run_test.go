//go:build unix

package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// loop keeps a child shell busy in short sleeps, so that a trap runs soon
// after its signal.
const loop = `touch "$D/ready"; while :; do sleep 0.05; done`

// leases lists the cluster's live leases.
func (h *harness) leases(t testing.TB) []clientv3.LeaseID {
	t.Helper()
	resp, err := h.cli.Leases(testkit.Ctx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var ids []clientv3.LeaseID
	for _, l := range resp.Leases {
		ids = append(ids, l.ID)
	}
	slices.Sort(ids)
	return ids
}

// runChild starts `poolctl run` with a shell script as the command. The
// script sees its private directory as $D.
func (h *harness) runChild(t *testing.T, inv *invocation, dir string, flags []string, script string) func() result {
	t.Helper()
	inv.vars["D"] = dir
	args := append(append([]string{"run"}, flags...), "--", "sh", "-c", script)
	return h.start(inv, args...)
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func waitFile(t testing.TB, path string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, filepath.Base(path), func() bool { return exists(path) })
}

func readPid(t testing.TB, path string) int {
	t.Helper()
	waitFile(t, path)
	var pid int
	testkit.Eventually(t, 5*time.Second, "pid in "+path, func() bool {
		b, _ := os.ReadFile(path)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		pid = n
		return err == nil
	})
	return pid
}

// heldBy returns the seat a holder has, waiting until it appears.
func (h *harness) heldBy(t testing.TB, pool, holder string) coordinator.Seat {
	t.Helper()
	var seat coordinator.Seat
	testkit.Eventually(t, 10*time.Second, holder+"'s seat", func() bool {
		seats, err := h.c.Seats(context.Background(), pool)
		for _, s := range seats {
			if s.Holder == holder {
				seat = s
			}
		}
		return err == nil && seat.Token > 0
	})
	return seat
}

func TestRunEnvAndExitCode(t *testing.T) {
	h := newHarness(t)
	h.createPool("anon", coordinator.PoolSpec{Capacity: 1})
	h.createPool("bound", coordinator.PoolSpec{Capacity: 1})
	agent := h.session(10 * time.Second)
	in := coordinator.Instance{ID: "node-1", Addr: "10.0.0.1:9000"}
	if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "bound", agent.Lease(), in); err != nil {
		t.Fatal(err)
	}
	before := h.leases(t)
	tests := []struct {
		name, pool   string
		script       string
		code         int
		inst, addr   string
		extraFlagArg []string
	}{
		{"exit 0", "anon", `env > "$D/env"`, 0, "", "", nil},
		{"exit 3 passes through", "anon", `env > "$D/env"; exit 3`, 3, "", "", nil},
		{"killed by signal", "anon", `env > "$D/env"; kill -KILL $$`, 128 + 9, "", "", nil},
		{"bound to instance", "bound", `env > "$D/env"`, 0, "node-1", "10.0.0.1:9000", []string{"--instance", "node-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, inv := t.TempDir(), newInvocation()
			inv.vars["ETCDPOOL_PASSWORD"] = "secret"
			inv.vars["ETCDPOOL_SEAT"] = "stale"
			flags := append([]string{tt.pool, "--holder", "tester", "--ttl", "5s"}, tt.extraFlagArg...)
			r := h.runChild(t, inv, dir, flags, tt.script)()
			if r.code != tt.code || r.err != "" {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tt.code, r.err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "env"))
			if err != nil {
				t.Fatal(err)
			}
			env := strings.Split(strings.TrimSpace(string(b)), "\n")
			seat := envValue(t, env, "ETCDPOOL_SEAT")
			token, _ := strconv.Atoi(envValue(t, env, "ETCDPOOL_TOKEN"))
			if envValue(t, env, "ETCDPOOL_POOL") != tt.pool || seat != "0" || token <= 0 ||
				envValue(t, env, "ETCDPOOL_INSTANCE") != tt.inst || envValue(t, env, "ETCDPOOL_INSTANCE_ADDR") != tt.addr {
				t.Errorf("child env: %q", env)
			}
			if drain := envValue(t, env, "ETCDPOOL_DRAIN_FILE"); (drain != "") != (tt.inst != "") {
				t.Errorf("ETCDPOOL_DRAIN_FILE=%q for instance %q: want a path exactly when bound to an instance", drain, tt.inst)
			}
			for _, kv := range env {
				if strings.HasPrefix(kv, "ETCDPOOL_PASSWORD=") {
					t.Error("ETCDPOOL_PASSWORD reached the command")
				}
			}
			if seats, err := h.c.Seats(testkit.Ctx(t, 5*time.Second), tt.pool); err != nil || len(seats) != 0 {
				t.Errorf("seats after run: %+v %v, want none", seats, err)
			}
			if got := h.leases(t); !slices.Equal(got, before) {
				t.Errorf("leases after run %v, want %v: the session was not revoked", got, before)
			}
		})
	}
}

// envValue returns the one value of key in env, failing on duplicates.
func envValue(t testing.TB, env []string, key string) string {
	t.Helper()
	var vals []string
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			vals = append(vals, v)
		}
	}
	if len(vals) != 1 {
		t.Fatalf("%s appears %d times in the command's environment", key, len(vals))
	}
	return vals[0]
}

func TestRunForwardsSignals(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 3})
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir, inv := t.TempDir(), newInvocation()
			script := fmt.Sprintf(`trap 'echo got > "$D/sig"; exit 42' %s; %s`, strings.TrimPrefix(sigName(sig), "SIG"), loop)
			wait := h.runChild(t, inv, dir, []string{"p"}, script)
			waitFile(t, filepath.Join(dir, "ready"))
			inv.sigs.send(t, sig)
			r := wait()
			if r.code != 42 || !exists(filepath.Join(dir, "sig")) {
				t.Fatalf("exit %d (want 42), trap ran: %v; stderr %q", r.code, exists(filepath.Join(dir, "sig")), r.err)
			}
		})
	}
}

func sigName(s syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGTERM: "TERM"}[s]
}
