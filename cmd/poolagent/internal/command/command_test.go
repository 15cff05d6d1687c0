package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/roles"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestExitCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"runtime", errors.New("etcd unreachable"), ExitError},
		{"config", fmt.Errorf("load: %w", &config.FieldError{Field: "agent.ttl", Msg: "too short"}), ExitUsage},
		{"usage", usageError{errors.New("unknown flag")}, ExitUsage},
		{"seat lost", fmt.Errorf("%w: %w", agent.ErrSeatLost, coordinator.ErrForceReleased), ExitSeatLost},
		{"wait timeout", agent.ErrWaitTimeout, ExitError},
	}
	for _, tc := range cases {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

func execute(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Execute(context.Background(), args, Streams{Out: &out, Err: &errb, LookupEnv: func(string) (string, bool) { return "", false }})
	return code, out.String(), errb.String()
}

func TestExecuteInProcess(t *testing.T) {
	if code, out, _ := execute("sidecar", "--help"); code != ExitOK || !strings.Contains(out, "ETCDPOOL_SEAT_FILE") {
		t.Errorf("sidecar --help: code %d, output lacks the env names:\n%s", code, out)
	}
	if code, _, errs := execute("serve", "extra"); code != ExitUsage || !strings.Contains(errs, "takes no arguments") {
		t.Errorf("serve extra: code %d, stderr %s", code, errs)
	}
	if code, _, errs := execute("sidecar", "--pool", "p", "--ttl", "1s"); code != ExitUsage || !strings.Contains(errs, "config: --ttl: 1s is outside") {
		t.Errorf("sidecar --ttl 1s: code %d, stderr %s", code, errs)
	}
	if code, _, errs := execute("dev", "--capacity", "0", "--data-dir", t.TempDir()); code != ExitUsage || !strings.Contains(errs, "config: --capacity: coordinator: invalid argument: capacity 0") {
		t.Errorf("dev --capacity 0: code %d, stderr %s", code, errs)
	}
}

// TestDevFlagErrorsNameTheFlag: an error about a value dev's own flags set
// names the flag, as serve's do (README, Configuration), not the config
// field the user never wrote. Found by a review (2026-12-05).
func TestDevFlagErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"dev", "--ttl", "1s"}, "config: --ttl: "},
		{[]string{"dev", "--instances", "0"}, "config: --instances: "},
		{[]string{"dev", "--log-level", "verbose"}, "config: --log-level: "},
		{[]string{"dev", "--seats", "-1"}, "config: --seats: "},
		{[]string{"dev", "--pool", "a b"}, "config: --pool: "},
	} {
		code, _, errs := execute(append(tc.args, "--data-dir", t.TempDir())...)
		if code != ExitUsage || !strings.Contains(errs, tc.flag) {
			t.Errorf("%v: exit %d, stderr %q: want exit 2 naming %s", tc.args, code, strings.TrimSpace(strings.Split(errs, "\n")[0]), tc.flag)
		}
	}
}

// TestStartupRefusals runs serve and sidecar in-process against an
// auth-enabled etcd: a user without the permissions its mode needs, or
// with a wrong password, exits 1 at once naming the operation and key;
// http:// with TLS settings is refused before connecting; the agent role
// is enough for serve.
func TestStartupRefusals(t *testing.T) {
	c := etcdtest.Start(t)
	root := etcdtest.EnableAuth(t, c.Client(t))
	testkit.CreatePool(t, testkit.Coordinator(t, root), "p", coordinator.PoolSpec{Capacity: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range []struct {
		pool  string
		actor roles.Actor
	}{{"p", roles.Agent}, {"q", roles.Claimant}, {"", roles.Viewer}} {
		name := roles.Name(coordinator.DefaultPrefix, r.pool, r.actor)
		if err := roles.Apply(ctx, root, name, roles.Permissions(coordinator.DefaultPrefix, r.pool, r.actor)); err != nil {
			t.Fatal(err)
		}
		etcdtest.AddUser(t, root, string(r.actor), "pw", name)
	}
	cfgFile := testkit.WriteFile(t, "agent.yaml", "agent:\n  instances:\n    - {pool: p, id: i0}\n")
	dir := t.TempDir()
	sidecar := []string{"sidecar", "--pool", "p", "--listen", "127.0.0.1:0", "--seat-file", dir + "/seat.json"}
	serve := []string{"serve", "--config", cfgFile, "--listen", "127.0.0.1:0"}
	tests := []struct {
		name     string
		user     string
		args     []string
		code     int
		want     string
		endpoint string
	}{
		{"serve as viewer", "viewer", serve, ExitError, "etcd refused write of /etcdpool/pools/p/instances/*: permission denied", ""},
		{"sidecar as viewer", "viewer", sidecar, ExitError, "etcd refused write of /etcdpool/pools/p/seats/*: permission denied", ""},
		{"sidecar as claimant of another pool", "claimant", sidecar, ExitError, "etcd refused read of /etcdpool/pools/p/*: permission denied", ""},
		{"wrong password", "agent:nope", serve, ExitError, "authentication failed", ""},
		{"upper-case http with TLS", "agent", append(serve, "--cacert", cfgFile), ExitUsage, "plain http://", "HTTP://" + strings.TrimPrefix(c.Endpoint(0), "http://")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := tt.endpoint
			if ep == "" {
				ep = c.Endpoint(0)
			}
			env := map[string]string{"ETCDPOOL_PASSWORD": "pw"}
			var errb testkit.SyncBuffer
			start := time.Now()
			// A login is a bcrypt check, slow under -race: room to connect.
			code := Execute(ctx, append(tt.args, "--endpoints", ep, "--user", tt.user, "--dial-timeout", "5s"),
				Streams{Out: &errb, Err: &errb, LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
			if code != tt.code || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("code %d, want %d; output lacks %q:\n%s", code, tt.code, tt.want, errb.String())
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	t.Run("serve as agent", func(t *testing.T) {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		var errb testkit.SyncBuffer
		done := make(chan int, 1)
		go func() {
			done <- Execute(sctx, append(serve, "--endpoints", c.Endpoint(0), "--user", "agent", "--drain-timeout", "0s", "--dial-timeout", "5s"),
				Streams{Out: &errb, Err: &errb, LookupEnv: func(k string) (string, bool) { return "pw", k == "ETCDPOOL_PASSWORD" }})
		}()
		key := coordinator.SegPrefix(coordinator.DefaultPrefix, "p", coordinator.SegInstances) + "i0"
		testkit.Eventually(t, 15*time.Second, "instance registered", func() bool {
			resp, err := root.Get(ctx, key)
			return err == nil && len(resp.Kvs) == 1
		})
		// Garbage over the instance, keeping the agent's lease: the agent
		// writes it again within its owner-check interval (5s).
		if _, err := root.Put(ctx, key, "garbage", clientv3.WithIgnoreLease()); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 20*time.Second, "corrupt instance repaired", func() bool {
			resp, err := root.Get(ctx, key)
			return err == nil && len(resp.Kvs) == 1 && coordinator.CheckInstanceValue("i0", resp.Kvs[0].Value) == nil
		})
		stop()
		if code := <-done; code != ExitOK {
			t.Errorf("serve as agent exited %d:\n%s", code, errb.String())
		}
	})
}
