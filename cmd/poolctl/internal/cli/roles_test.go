package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRoles applies each actor's role with `poolctl roles --apply` to an
// auth-enabled etcd, gives it to a user, and runs poolctl as that user:
// what the actor needs works, and what it must not do fails within a few
// seconds with exit 8 (denied).
func TestRoles(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2})
	h.createPool("q", coordinator.PoolSpec{Capacity: 1})
	root := etcdtest.EnableAuth(t, h.cli)
	asRoot := loginTimeouts("--user", "root:"+etcdtest.RootPassword)
	for _, a := range []struct{ pool, actor string }{{"p", "claimant"}, {"p", "agent"}, {"", "operator"}, {"", "viewer"}} {
		args := append(append([]string{}, asRoot...), "roles", "--actor", a.actor, "--apply")
		if a.pool != "" {
			args = append(args, a.pool)
		}
		r := h.run(args...)
		r.want(t, ExitOK)
		role := "etcdpool-" + a.actor
		if a.pool != "" {
			role = "etcdpool-" + a.pool + "-" + a.actor
		}
		if !strings.Contains(r.out, "role "+role+" created") {
			t.Fatalf("roles --apply output: %q", r.out)
		}
		etcdtest.AddUser(t, root, a.actor, "pw", role)
	}
	// An instance for the claimant to bind to, registered as the agent.
	agentCli := h.userClient(t, "agent", "pw")
	agentCo := testkit.Coordinator(t, agentCli)
	// A long TTL: the bcrypt logins below can starve a loaded 2-core
	// machine for seconds, and the instance must outlive the whole table.
	sess := testkit.Session(t, agentCli, time.Minute)
	if _, err := agentCo.RegisterInstance(testkit.Ctx(t, 10*time.Second), "p", sess.Lease(), coordinator.Instance{ID: "i0", Seats: 2}); err != nil {
		t.Fatalf("agent role: register instance: %v", err)
	}

	tests := []struct {
		user string
		args []string
		code int
		want string // in stderr for a denial
	}{
		{"claimant", []string{"run", "p", "--no-wait", "--", "true"}, ExitOK, ""},
		{"claimant", []string{"seats", "p"}, ExitOK, ""},
		{"claimant", []string{"seats", "q"}, ExitDenied, "permission denied"},
		{"claimant", []string{"watch", "q"}, ExitDenied, "read of /etcdpool/pools/q/*: permission denied"},
		{"claimant", []string{"pool", "create", "x", "--capacity", "1"}, ExitDenied, "permission denied"},
		{"claimant", []string{"drain", "p", "i0"}, ExitDenied, "permission denied"},
		{"agent", []string{"status"}, ExitOK, ""},
		{"agent", []string{"instances", "p"}, ExitOK, ""},
		{"agent", []string{"pool", "set", "p", "--capacity", "3"}, ExitDenied, "permission denied"},
		{"viewer", []string{"status"}, ExitOK, ""},
		{"viewer", []string{"seats", "p"}, ExitOK, ""},
		{"viewer", []string{"pool", "create", "x", "--capacity", "1"}, ExitDenied, "permission denied"},
		{"viewer", []string{"drain", "p", "i0"}, ExitDenied, "permission denied"},
		{"viewer", []string{"run", "p", "--no-wait", "--", "true"}, ExitDenied, "permission denied"},
		{"viewer", []string{"run", "p", "--ttl", "2s", "--", "true"}, ExitDenied, "permission denied"},
		{"operator", []string{"pool", "create", "x", "--capacity", "1"}, ExitOK, ""},
		{"operator", []string{"drain", "p", "i0"}, ExitOK, ""},
		{"operator", []string{"roles", "--actor", "viewer", "--apply"}, ExitDenied, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.user+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			start := time.Now()
			r := h.run(loginTimeouts(append([]string{"--user", tt.user + ":pw"}, tt.args...)...)...)
			r.want(t, tt.code)
			t.Logf("stderr: %s", r.err)
			if !strings.Contains(r.err, tt.want) {
				t.Errorf("stderr %q lacks %q", r.err, tt.want)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
