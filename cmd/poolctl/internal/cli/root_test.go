package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// deadEndpoint is a loopback address nothing listens on.
func deadEndpoint(t *testing.T) string {
	t.Helper()
	return testkit.FreeAddr(t)
}

func runArgs(inv *invocation, args ...string) result {
	code := Main(args, inv.env)
	return result{code: code, out: inv.out.String(), err: inv.err.String()}
}

func TestUnreachable(t *testing.T) {
	dead := deadEndpoint(t)
	for _, args := range [][]string{
		{"status"},
		{"pool", "create", "p", "--capacity", "1"},
		{"seats", "p"},
		{"release", "p", "0", "--token", "5"},
		{"watch"},
		{"run", "p", "--", "true"},
	} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			r := runArgs(newInvocation(), append([]string{"--endpoints", dead, "--dial-timeout", "300ms"}, args...)...)
			r.want(t, ExitUnreachable)
			if !strings.Contains(r.err, "etcd unreachable at "+dead) {
				t.Errorf("stderr %q does not name the endpoint", r.err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v to give up; --dial-timeout is 300ms", d)
			}
		})
	}
	t.Run("env", func(t *testing.T) {
		inv := newInvocation()
		inv.vars["ETCDPOOL_ENDPOINTS"] = dead
		r := runArgs(inv, "status", "--dial-timeout", "300ms")
		r.want(t, ExitUnreachable)
		if !strings.Contains(r.err, dead) {
			t.Errorf("ETCDPOOL_ENDPOINTS was not used: %q", r.err)
		}
	})
}

// TestNoQuorum connects to a member that has lost its quorum: the
// connection succeeds but requests get no answer, which --command-timeout
// turns into exit 4.
func TestNoQuorum(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	c.Stop(1)
	c.Stop(2)
	r := runArgs(newInvocation(), "--endpoints", c.Endpoint(0), "--command-timeout", "1s", "status")
	r.want(t, ExitUnreachable)
}

func TestGlobalFlags(t *testing.T) {
	dead := deadEndpoint(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"bad output", []string{"-o", "xml", "status"}, ExitUsage},
		{"cert without key", []string{"--cert", junk, "status"}, ExitUsage},
		{"missing cacert", []string{"--cacert", filepath.Join(dir, "nope.pem"), "status"}, ExitUsage},
		{"junk cacert", []string{"--cacert", junk, "status"}, ExitUsage},
		{"junk cert", []string{"--cert", junk, "--key", junk, "status"}, ExitUsage},
		{"http with tls", []string{"--endpoints", "http://" + dead, "--cacert", junk, "status"}, ExitUsage},
		{"zero dial timeout", []string{"--dial-timeout", "0s", "status"}, ExitUsage},
		{"empty endpoint", []string{"--endpoints", ",", "status"}, ExitUsage},
		{"user without name", []string{"--user", ":pw", "status"}, ExitUsage},
		{"user without password", []string{"--user", "root", "status"}, ExitUsage},
		{"unknown flag", []string{"status", "--frobnicate"}, ExitUsage},
		{"unknown command", []string{"frobnicate"}, ExitUsage},
		{"bad prefix", []string{"--prefix", "nope", "status"}, ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--endpoints", dead, "--dial-timeout", "300ms"}, tt.args...)
			r := runArgs(newInvocation(), args...)
			r.want(t, tt.code) // before connecting: the endpoint is dead
		})
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.enableAuth(t)
	pw := etcdtest.RootPassword
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		prompt string // what the fake terminal answers; "" fails
		code   int
	}{
		{"user:password", []string{"--user", "root:" + pw, "pool", "create", "a", "--capacity", "1"}, nil, "", ExitOK},
		{"password from env", []string{"--user", "root", "pool", "get", "a"}, map[string]string{"ETCDPOOL_PASSWORD": pw}, "", ExitOK},
		{"password prompted", []string{"--user", "root", "status"}, nil, pw, ExitOK},
		{"wrong password", []string{"--user", "root:nope", "status"}, nil, "", ExitDenied},
		{"no credentials", []string{"status"}, nil, "", ExitDenied},
		{"no password, no terminal", []string{"--user", "root", "status"}, nil, "", ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := newInvocation()
			for k, v := range tt.env {
				inv.vars[k] = v
			}
			if tt.prompt != "" {
				inv.env.ReadPassword = func(string) (string, error) { return tt.prompt, nil }
			}
			h.runWith(inv, loginTimeouts(tt.args...)...).want(t, tt.code)
		})
	}
}

func TestCompletion(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	h.createPool("builds", coordinator.PoolSpec{Capacity: 1})
	for shell, marker := range map[string]string{"bash": "__start_poolctl", "zsh": "#compdef poolctl", "fish": "complete -c poolctl"} {
		t.Run(shell, func(t *testing.T) {
			r := h.run("completion", shell)
			r.want(t, ExitOK)
			if !strings.Contains(r.out, marker) {
				t.Errorf("%s script lacks %q", shell, marker)
			}
		})
	}
	t.Run("unknown shell", func(t *testing.T) { h.run("completion", "tcsh").want(t, ExitUsage) })
	t.Run("pool names", func(t *testing.T) {
		r := h.run("__complete", "seats", "g")
		r.want(t, ExitOK)
		if got := lines(r.out); len(got) < 2 || got[0] != "gpu" || !strings.HasPrefix(got[1], ":") {
			t.Errorf("completions %q, want gpu", got)
		}
	})
}

func TestVersionAndHelp(t *testing.T) {
	r := runArgs(newInvocation(), "version")
	r.want(t, ExitOK)
	if !strings.HasPrefix(r.out, "poolctl ") || !strings.Contains(r.out, runtime.Version()) {
		t.Errorf("version = %q", r.out)
	}
	r = runArgs(newInvocation(), "version", "-o", "json")
	r.want(t, ExitOK)
	var v versionView
	if err := json.Unmarshal([]byte(r.out), &v); err != nil || v.Version == "" || v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version json = %+v (%v)", v, err)
	}
	r = runArgs(newInvocation(), "--help")
	r.want(t, ExitOK)
	if !strings.Contains(r.out, "Exit codes:") {
		t.Error("--help does not list the exit codes")
	}
}
