package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestRunStopsCgroupEscapee: a descendant of the command moves itself to
// another cgroup (as processes that systemd-run --scope, tmux or podman's
// conmon start are moved into scopes of their own) and is orphaned to the
// guard. It must die with the rest when the command exits, in cgroup mode
// as in /proc mode. Found by a review (2026-12-05): in cgroup mode the
// guard's kill wrote cgroup.kill and, that having worked, did not walk its
// descendants; the process survived every kill, and run released the seat
// and exited 0.
func TestRunStopsCgroupEscapee(t *testing.T) {
	mount, root, ok := cgroup2Mount()
	own, ok2 := ownCgroup()
	if !ok || !ok2 {
		t.Skip("no cgroup v2 here")
	}
	for _, mode := range []string{"cgroup", "proc"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t)
			h.createPool("p", coordinator.PoolSpec{Capacity: 1})
			esc := filepath.Join(mount, strings.TrimPrefix(own, root), fmt.Sprintf("escape-test-%d", time.Now().UnixNano()))
			if err := os.Mkdir(esc, 0o755); err != nil {
				t.Skipf("cannot make a cgroup to escape to: %v", err)
			}
			dir, inv := t.TempDir(), newInvocation()
			inv.vars["ESC"] = esc
			if mode == "proc" {
				inv.vars[noCgroupEnv] = "1"
			}
			script := `( setsid sh -c 'echo $$ > "$ESC/cgroup.procs"; echo $$ > "$D/pid"; exec sleep 300' & ); while [ ! -s "$D/pid" ]; do sleep 0.01; done; exit 0`
			wait := h.runChild(t, inv, dir, []string{"p", "--kill-grace", "500ms"}, script)
			pid := readPid(t, filepath.Join(dir, "pid"))
			t.Cleanup(func() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				testkit.Eventually(t, 5*time.Second, "the escapee gone, for its cgroup's removal", func() bool { return testkit.PidGone(pid) })
				_ = syscall.Rmdir(esc)
			})
			r := wait()
			if !testkit.PidGone(pid) {
				t.Errorf("run exited %d (stderr %q), but the command's descendant %d, moved to another cgroup, still runs", r.code, r.err, pid)
			}
		})
	}
}

// TestRunCutOffNotBlamedOnStop: poolctl is healthy, never stopped nor
// hung; only etcd is cut off, so its session's local deadline passes, and
// the guard's timer and poolctl's own watchdog fire at the same moment.
// poolctl must not say it was stopped or hung, and must say SIGKILL when
// the command, ignoring SIGTERM, needed it. Found by a review
// (2026-12-05): the guard usually came first, and run said so.
func TestRunCutOffNotBlamedOnStop(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"exits on SIGTERM", `trap 'exit 143' TERM; touch "$D/ready"; while :; do sleep 0.05; done`},
		{"ignores SIGTERM", `trap '' TERM; touch "$D/ready"; while :; do sleep 0.05; done`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.createPool("p", coordinator.PoolSpec{Capacity: 1})
			px := etcdtest.NewProxy(t, h.eps)
			dir, inv := t.TempDir(), newInvocation()
			inv.vars["D"] = dir
			done := make(chan result, 1)
			go func() {
				code := Main([]string{"--endpoints", px.URL(), "run", "p", "--ttl", "2s", "--", "sh", "-c", tc.script}, inv.env)
				done <- result{code: code, out: inv.out.String(), err: inv.err.String()}
			}()
			waitFile(t, filepath.Join(dir, "ready"))
			px.Blackhole()
			r := <-done
			px.Restore()
			if r.code != ExitSeatLost {
				t.Errorf("exit %d, want %d: %s", r.code, ExitSeatLost, r.err)
			}
			if strings.Contains(r.err, "stopped or hung") {
				t.Errorf("poolctl was neither stopped nor hung (etcd was cut off), yet it says: %q", r.err)
			}
			if tc.name == "ignores SIGTERM" && !strings.Contains(r.err, "sent SIGKILL") {
				t.Errorf("the command ignored SIGTERM and was SIGKILLed, yet run does not say so: %q", r.err)
			}
		})
	}
}

// TestGuardRefusesPastDeadline: startGroup tells the guard the session's
// deadline before the guard starts the command. When that deadline has
// passed already (poolctl stopped meanwhile, or its watchdog late), the
// guard must not start the command at all, and startGroup says why.
// Found by a review (2026-12-05): the guard started it, and SIGKILLed it
// only the grace later.
func TestGuardRefusesPastDeadline(t *testing.T) {
	path, err := lookCommand("sh")
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	past := guardDeadline{at: time.Now().Add(-2 * time.Second), grace: 200 * time.Millisecond}
	grp, err := startGroup(path, []string{"sh", "-c", `touch "$M"; trap '' TERM; sleep 1`},
		append(os.Environ(), "M="+marker), nil, io.Discard, io.Discard, past)
	if err == nil {
		defer grp.close()
		<-grp.exited
	}
	if err == nil {
		t.Fatalf("the guard started the command (pid %d; it got as far as its marker: %v) past the session's deadline", grp.pid, exists(marker))
	}
	if !errors.Is(err, errPastDeadline) {
		t.Fatalf("startGroup past the deadline: %v; want errPastDeadline", err)
	}
}

// TestGuardWithoutFirstLineStartsNothing: startGroup writes the session's
// deadline into the guard's control pipe before it starts the guard. A
// guard that finds the pipe closed with no line in it has a poolctl gone
// already (killed between the two): nobody holds a seat for the command,
// so it must not start it. Found by a review (2026-12-05): it started the
// command with no deadline at all.
func TestGuardWithoutFirstLineStartsNothing(t *testing.T) {
	path, err := lookCommand("sh")
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stR.Close()
	ctlW.Close() // poolctl is gone before its first line
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: []string{"poolctl", guardArg, path, "sh", "-c", `touch "$M"`},
		Env: append(os.Environ(), "M="+marker), ExtraFiles: []*os.File{ctlR, stW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctlR.Close()
	stW.Close()
	status, _ := io.ReadAll(stR) // to EOF: the guard has exited
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitError {
		t.Errorf("the guard ended with %v; want exit %d", err, ExitError)
	}
	if strings.Contains(string(status), "pid ") || exists(marker) {
		t.Errorf("the guard started the command without a deadline (status %q, marker there: %v)", status, exists(marker))
	}
}
