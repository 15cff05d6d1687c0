//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestE2E builds poolctl and drives the binary against a real etcd.
func TestE2E(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "poolctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("links no etcd server", func(t *testing.T) { checkBuildInfo(t, bin) })
	e := &env{t: t, bin: bin, eps: strings.Join(etcdtest.Start(t).Endpoints(), ",")}
	e.ok("pool", "create", "e2e", "--capacity", "2")
	// For the SIGKILL tests: killed holders' seats outlive them by a TTL.
	e.ok("pool", "create", "kill", "--capacity", "1000", "--ttl", "2s")
	t.Run("three holders on two seats", e.threeHolders)
	t.Run("grandchild dies with the seat", e.grandchild)
	t.Run("SIGKILL of poolctl kills the whole tree", e.sigkill)
	t.Run("SIGKILL of the guard kills the command", e.guardKilled)
	t.Run("SIGKILL churn never exceeds capacity", e.churn)
	t.Run("Ctrl-Z does not suspend run", e.suspend)
	if runtime.GOOS == "linux" {
		t.Run("SIGSTOP of poolctl: the guard kills the command by the deadline", e.sigstop)
		t.Run("SIGSTOP of poolctl as it starts the command", e.sigstopAtStart)
		t.Run("SIGSTOP of poolctl during a grace", e.sigstopInGrace)
	}
}

// suspend sends poolctl run the SIGTSTP that Ctrl-Z sends the terminal's
// foreground process group, which holds poolctl but not its command (a
// process group of its own). Stopped, poolctl would send no keepalive, and
// its seat would go to another after the TTL while the command ran on
// (found by a review, 2026-12-05). It must go on holding the seat, and say
// why it did not stop.
func (e *env) suspend(t *testing.T) {
	e.ok("pool", "create", "tstp", "--capacity", "1", "--ttl", "2s")
	dir := t.TempDir()
	p := e.start(t, dir, "tstp", "run", "tstp", "--holder", "first", "--", "sh", "-c", `touch "$D/ready"; sleep 300`)
	testkit.Eventually(t, 15*time.Second, "the command to start", func() bool { return exists(filepath.Join(dir, "ready")) })
	if err := p.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // over twice the TTL: a stopped poolctl's seat would be gone
	if seats := e.ok("seats", "tstp"); !strings.Contains(seats, "first") {
		t.Errorf("after SIGTSTP and twice the TTL, the seat is no longer held by run's session:\n%s", seats)
	}
	testkit.Eventually(t, 5*time.Second, "a warning that run was not suspended", func() bool {
		return strings.Contains(p.stderr(), "not suspended (SIGTSTP)")
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.exit(t)
}

// env runs the poolctl binary.
type env struct {
	t   *testing.T
	bin string
	eps string
}

// proc is a poolctl process in the background, its output in files.
type proc struct {
	cmd      *exec.Cmd
	out, err string
	done     chan struct{}
}

func (e *env) command(t *testing.T, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(os.Environ(), "ETCDPOOL_ENDPOINTS="+e.eps, "D="+dir)
	return cmd
}

// start runs poolctl in the background; stdout and stderr go to files so
// that a grandchild holding them open cannot stall the test.
func (e *env) start(t *testing.T, dir, name string, args ...string) *proc {
	t.Helper()
	return e.startEnv(t, dir, name, nil, args...)
}

// startEnv is start with extra environment variables.
func (e *env) startEnv(t *testing.T, dir, name string, extra []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: e.command(t, dir, args...), out: filepath.Join(dir, name+".out"), err: filepath.Join(dir, name+".err"), done: make(chan struct{})}
	p.cmd.Env = append(p.cmd.Env, extra...)
	p.cmd.Stdout, p.cmd.Stderr = create(t, p.out), create(t, p.err)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

func create(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// exit waits for the process and returns its exit code.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not exit", p.cmd.Args)
		return -1
	}
}

func (p *proc) stderr() string { b, _ := os.ReadFile(p.err); return string(b) }
func (p *proc) stdout() string { b, _ := os.ReadFile(p.out); return string(b) }

// run runs poolctl to completion.
func (e *env) run(args ...string) (code int, stdout, stderr string) {
	cmd := e.command(e.t, "", args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

func (e *env) ok(args ...string) string {
	e.t.Helper()
	code, out, stderr := e.run(args...)
	if code != 0 {
		e.t.Fatalf("poolctl %v: exit %d: %s", args, code, stderr)
	}
	return out
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// holderScript marks that it started, traps SIGTERM into a marker file,
// and runs until its stop file appears.
const holderScript = `exec 2>/dev/null
trap 'echo term > "$D/$H.term"; exit 143' TERM
touch "$D/$H.started"
while [ ! -e "$D/$H.stop" ]; do sleep 0.05; done`

func (e *env) holder(t *testing.T, dir, name string) *proc {
	return e.start(t, dir, name, "run", "e2e", "--holder", name, "--", "sh", "-c", strings.ReplaceAll(holderScript, "$H", name))
}

// seatOf finds a holder's seat and token with `poolctl seats -o json`.
func (e *env) seatOf(holder string) (seat int, token int64) {
	var v struct {
		Seats []struct {
			Seat   int    `json:"seat"`
			Holder string `json:"holder"`
			Token  int64  `json:"token"`
		} `json:"seats"`
	}
	if err := json.Unmarshal([]byte(e.ok("seats", "e2e", "-o", "json")), &v); err != nil {
		e.t.Fatal(err)
	}
	for _, s := range v.Seats {
		if s.Holder == holder {
			return s.Seat, s.Token
		}
	}
	e.t.Fatalf("%s holds no seat", holder)
	return 0, 0
}

func (e *env) threeHolders(t *testing.T) {
	dir := t.TempDir()
	watch := e.startWatch(t, dir)
	h1 := e.holder(t, dir, "h1")
	testkit.Eventually(t, 15*time.Second, "h1 to start", func() bool { return exists(filepath.Join(dir, "h1.started")) })
	h2 := e.holder(t, dir, "h2")
	testkit.Eventually(t, 15*time.Second, "h2 to start", func() bool { return exists(filepath.Join(dir, "h2.started")) })
	h3 := e.holder(t, dir, "h3")
	testkit.Eventually(t, 15*time.Second, "h3 to queue", func() bool { return strings.Contains(e.ok("queue", "e2e"), "h3") })
	if exists(filepath.Join(dir, "h3.started")) {
		t.Fatal("h3 started while two seats were held")
	}
	// h1 ends: h3 gets its seat.
	touch(t, filepath.Join(dir, "h1.stop"))
	if code := h1.exit(t); code != 0 {
		t.Fatalf("h1 exited %d: %s", code, h1.stderr())
	}
	testkit.Eventually(t, 15*time.Second, "h3 to start", func() bool { return exists(filepath.Join(dir, "h3.started")) })
	// A stale token changes nothing; the right one stops h2.
	seat, token := e.seatOf("h2")
	if code, _, stderr := e.run("release", "e2e", strconv.Itoa(seat), "--token", fmt.Sprint(token+1000)); code != 3 || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("stale token: exit %d, stderr %q; want 3 and one line", code, stderr)
	}
	if exists(filepath.Join(dir, "h2.term")) {
		t.Fatal("a stale release reached h2")
	}
	e.ok("release", "e2e", strconv.Itoa(seat), "--token", fmt.Sprint(token), "--reason", "e2e")
	if code := h2.exit(t); code != 7 || !strings.Contains(h2.stderr(), "force-released") {
		t.Fatalf("h2 exited %d (want 7): %s", code, h2.stderr())
	}
	if !exists(filepath.Join(dir, "h2.term")) {
		t.Fatal("h2's command did not get SIGTERM")
	}
	touch(t, filepath.Join(dir, "h3.stop"))
	if code := h3.exit(t); code != 0 {
		t.Fatalf("h3 exited %d: %s", code, h3.stderr())
	}
	testkit.Eventually(t, 15*time.Second, "h3's release in the watch", func() bool { return strings.Count(watch.stdout(), `"seat-released"`) == 2 })
	if err := watch.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := watch.exit(t); code != 0 {
		t.Fatalf("watch exited %d: %s", code, watch.stderr())
	}
	checkEvents(t, watch.stdout(), []string{
		"seat-claimed h1", "seat-claimed h2", "waiter-joined h3", "seat-released h1",
		"seat-claimed h3", "waiter-left h3", "seat-force-released h2 e2e", "seat-released h3",
	})
}

// startWatch starts `poolctl watch -o json` and pokes the pool until the
// stream is live.
func (e *env) startWatch(t *testing.T, dir string) *proc {
	t.Helper()
	w := e.start(t, dir, "watch", "watch", "e2e", "-o", "json")
	testkit.Eventually(t, 15*time.Second, "watch to stream", func() bool {
		e.ok("pool", "set", "e2e", "--capacity", "2")
		return strings.Contains(w.stdout(), "spec-changed")
	})
	return w
}

// checkEvents compares the JSON lines, without the pokes, with want.
func checkEvents(t *testing.T, out string, want []string) {
	t.Helper()
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct{ Type, Holder, Reason string }
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
		if ev.Type != "spec-changed" {
			got = append(got, strings.TrimSpace(ev.Type+" "+ev.Holder+" "+ev.Reason))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func (e *env) grandchild(t *testing.T) {
	dir := t.TempDir()
	p := e.start(t, dir, "gc", "run", "e2e", "--holder", "gc", "--", "sh", "-c", `sleep 300 & echo $! > "$D/gc.pid"; wait`)
	var pid int
	testkit.Eventually(t, 15*time.Second, "grandchild pid", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "gc.pid"))
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		pid = n
		return err == nil
	})
	if testkit.PidGone(pid) {
		t.Fatal("the grandchild is not running to begin with")
	}
	seat, _ := e.seatOf("gc")
	e.ok("release", "e2e", strconv.Itoa(seat), "--force")
	if code := p.exit(t); code != 7 {
		t.Fatalf("poolctl run exited %d, want 7: %s", code, p.stderr())
	}
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("grandchild %d to be gone", pid), func() bool { return testkit.PidGone(pid) })
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
