//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// stubbornScript ignores SIGTERM, as does the child it forks, so that only
// SIGKILL ends them; each writes its pid.
const stubbornScript = `exec 2>/dev/null
trap '' TERM
echo $$ > "$D/leader.pid"
sh -c 'trap "" TERM; echo $$ > "$D/child.pid"; while :; do sleep 0.05; done' &
while :; do sleep 0.05; done`

// sigstop stops `poolctl run` with SIGSTOP, which no process can catch,
// while its command and the command's child ignore SIGTERM, and a second
// run waits for the seat. Stopped, poolctl sends no keepalive: its lease
// ends, and the seat goes to the waiter. The guard must have killed the
// whole tree by then, at the session's local deadline plus half its
// margin, so that the tree is gone while the seat is still the stopped
// run's. Resumed, poolctl says what happened and exits 7.
//
// ETCDPOOL_RUN_STOP_TRIALS=N runs N trials (default 1).
func (e *env) sigstop(t *testing.T) {
	e.ok("pool", "create", "stopped", "--capacity", "1", "--ttl", "2s")
	cli := testkit.Client(t, strings.Split(e.eps, ",")...)
	c, err := coordinator.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	trials := envInt(t, stopTrialsEnv, 1)
	var killed, slack []time.Duration
	for i := range trials {
		k, s := e.stopOnce(t, c, i)
		killed, slack = append(killed, k), append(slack, s)
	}
	slices.Sort(killed)
	slices.Sort(slack)
	t.Logf("SIGSTOP of poolctl (TTL 2s, margin 500 ms), %d trials: command tree killed after median %v, max %v; "+
		"the waiter's command started after that by min %v, median %v", trials,
		killed[trials/2].Round(time.Millisecond), killed[trials-1].Round(time.Millisecond),
		slack[0].Round(time.Millisecond), slack[trials/2].Round(time.Millisecond))
}

// stopTrialsEnv sets the number of SIGSTOP trials.
const stopTrialsEnv = "ETCDPOOL_RUN_STOP_TRIALS"

// stopOnce is one trial of sigstop. It returns how long after SIGSTOP the
// tree was found gone, and how long after that the waiter's command
// started.
func (e *env) stopOnce(t *testing.T, c *coordinator.Coordinator, trial int) (killed, slack time.Duration) {
	t.Helper()
	dir := t.TempDir()
	holder := "stopped-" + strconv.Itoa(trial)
	p := e.start(t, dir, "s", "run", "stopped", "--holder", holder, "--", "sh", "-c", stubbornScript)
	pids := map[string]int{}
	for _, name := range []string{"leader", "child"} {
		pids[name] = readPid(t, filepath.Join(dir, name+".pid"))
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	next := filepath.Join(dir, "next.started")
	w := e.start(t, dir, "w", "run", "stopped", "--holder", "next-"+strconv.Itoa(trial), "--wait", "60s", "--", "sh", "-c", `touch "$D/next.started"`)
	testkit.Eventually(t, 15*time.Second, "the second run to wait in line", func() bool {
		q, err := c.Queue(context.Background(), "stopped")
		return err == nil && len(q) == 1
	})
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
	took := treeGoneFirst(t, stopped, next, pids["leader"], pids["child"])
	// The tree is gone. The seat must still be the stopped run's: else it
	// could have been granted while the tree ran.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	seats, err := c.Seats(ctx, "stopped")
	if err != nil {
		t.Fatal(err)
	}
	if len(seats) != 1 || seats[0].Holder != holder {
		t.Fatalf("when the stopped run's command was found gone (%v after SIGSTOP), the seat was no longer its: %+v", took.Round(time.Millisecond), seats)
	}
	testkit.Eventually(t, 15*time.Second, "the waiter to get the seat", func() bool { return exists(next) })
	st, err := os.Stat(next)
	if err != nil {
		t.Fatal(err)
	}
	slack = st.ModTime().Sub(stopped.Add(took))
	if code := w.exit(t); code != 0 {
		t.Errorf("the waiting run exited %d: %s", code, w.stderr())
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := p.exit(t); code != 7 || !strings.Contains(p.stderr(), "stopped or hung") || !strings.Contains(p.stderr(), "sent SIGKILL") {
		t.Errorf("the resumed run exited %d (want 7, saying it was stopped and its guard sent SIGKILL): %s", code, p.stderr())
	}
	return took, slack
}

// sigstopAtStart stops poolctl as it starts its guard, before the guard
// has started the command. The guard must have the session's deadline all
// the same: it was told it before it started. Found by a review
// (2026-12-05): the first deadline went after the guard's handshake, and a
// command started in that window ran on after its seat went to a waiter.
func (e *env) sigstopAtStart(t *testing.T) {
	e.ok("pool", "create", "stopstart", "--capacity", "1", "--ttl", "2s")
	dir := t.TempDir()
	p := e.start(t, dir, "s", "run", "stopstart", "--holder", "first", "--", "sh", "-c",
		`exec 2>/dev/null; echo $$ > "$D/leader.pid"; trap '' TERM; while :; do sleep 0.05; done`)
	pid := p.cmd.Process.Pid
	guard := 0
	for deadline := time.Now().Add(20 * time.Second); guard == 0; guard = guardOf(pid) { // forked once the seat is granted
		if time.Now().After(deadline) {
			t.Fatal("poolctl forked no guard")
		}
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	leaderPid := filepath.Join(dir, "leader.pid")
	// On a loaded machine the deadline may pass before the command has
	// written its pid: the guard's SIGTERM then ends it, and the guard
	// exits with its tree.
	testkit.Eventually(t, 15*time.Second, "the guard to start the command, or to end with it", func() bool {
		return exists(leaderPid) || testkit.PidGone(guard)
	})
	next := filepath.Join(dir, "next.started")
	w := e.start(t, dir, "w", "run", "stopstart", "--holder", "next", "--wait", "60s", "--", "sh", "-c", `touch "$D/next.started"`)
	if exists(leaderPid) {
		leader := readPid(t, leaderPid)
		t.Cleanup(func() { _ = syscall.Kill(leader, syscall.SIGKILL) })
		treeGoneFirst(t, stopped, next, leader)
	} else {
		t.Logf("the guard ended the command before it wrote its pid (%v after SIGSTOP)", time.Since(stopped))
	}
	testkit.Eventually(t, 15*time.Second, "the waiter to get the seat", func() bool { return exists(next) })
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if code := w.exit(t); code != 0 {
		t.Errorf("the waiting run exited %d: %s", code, w.stderr())
	}
	if code := p.exit(t); code != 7 {
		t.Errorf("the resumed run exited %d (want 7): %s", code, p.stderr())
	}
}

// guardOf returns the child of pid that runs as its guard (exec'd, its
// command line says __guard), or 0. Not any child: Go's os package clones
// a short-lived child of its own to probe for pidfd support, and a fork
// not yet exec'd still reads as poolctl.
func guardOf(pid int) int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(c)
			cmdline, _ := os.ReadFile("/proc/" + c + "/cmdline")
			if strings.Contains(string(cmdline), "__guard") && !testkit.PidGone(n) {
				return n
			}
		}
	}
	return 0
}

// sigstopInGrace stops poolctl while a grace of --kill-grace 60s runs:
// after the command exited leaving a child that ignores SIGTERM, or after
// the seat's instance went (the seat held until the command is gone). The
// guard ends the tree at the session's deadline all the same, SIGKILL
// included, before the seat goes to the waiter; resumed, run exits 7 and
// says it sent SIGKILL. (Found by a review, 2026-12-05: run said SIGTERM.)
func (e *env) sigstopInGrace(t *testing.T) {
	cli := testkit.Client(t, strings.Split(e.eps, ",")...)
	c, err := coordinator.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := testkit.Ctx(t, 60*time.Second)
	for _, tc := range []struct{ name, script string }{
		{"leftover after exit", `exec 2>/dev/null
sh -c 'trap "" TERM; echo $$ > "$D/tree.pid"; while :; do sleep 0.05; done' &
sleep 0.3`},
		{"instance gone", `exec 2>/dev/null; trap '' TERM; echo $$ > "$D/tree.pid"; while :; do sleep 0.05; done`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := strings.ReplaceAll(tc.name, " ", "-")
			e.ok("pool", "create", pool, "--capacity", "1", "--ttl", "2s")
			args := []string{"run", pool, "--holder", "first", "--kill-grace", "60s"}
			if tc.name == "instance gone" {
				agent := testkit.Session(t, cli, 30*time.Second)
				if _, err := c.RegisterInstance(ctx, pool, agent.Lease(), coordinator.Instance{ID: "node-1"}); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--instance", "node-1")
			}
			dir := t.TempDir()
			p := e.start(t, dir, "s", append(args, "--", "sh", "-c", tc.script)...)
			tree := readPid(t, filepath.Join(dir, "tree.pid"))
			t.Cleanup(func() { _ = syscall.Kill(tree, syscall.SIGKILL) })
			next := filepath.Join(dir, "next.started")
			w := e.start(t, dir, "w", "run", pool, "--holder", "next", "--wait", "60s", "--", "sh", "-c", `touch "$D/next.started"`)
			testkit.Eventually(t, 15*time.Second, "the waiter in line", func() bool {
				q, err := c.Queue(ctx, pool)
				return err == nil && len(q) == 1
			})
			if tc.name == "instance gone" {
				if err := c.DeregisterInstance(ctx, pool, "node-1"); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(500 * time.Millisecond) // into the grace: the command exited, or its instance went
			if exists(next) {
				t.Fatal("the seat went to the waiter during the grace, with the tree running")
			}
			if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
			treeGoneFirst(t, stopped, next, tree)
			testkit.Eventually(t, 15*time.Second, "the waiter to get the seat", func() bool { return exists(next) })
			w.exit(t)
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			if code := p.exit(t); code != 7 || !strings.Contains(p.stderr(), "sent SIGKILL") || !strings.Contains(p.stderr(), "stopped or hung") {
				t.Errorf("the resumed run exited %d (want 7, saying it was stopped and its guard sent SIGKILL): %s", code, p.stderr())
			}
		})
	}
}

// treeGoneFirst waits, polling every 2 ms, until none of pids runs, and
// fails if the waiter's marker file next appears first: the seat went to
// the waiter while the stopped run's tree still ran. It returns how long
// after stopped the tree was found gone.
func treeGoneFirst(t *testing.T, stopped time.Time, next string, pids ...int) time.Duration {
	t.Helper()
	for {
		running := slices.DeleteFunc(slices.Clone(pids), testkit.PidGone)
		if len(running) == 0 {
			return time.Since(stopped)
		}
		if exists(next) {
			t.Fatalf("the seat went to the waiter %v after SIGSTOP of poolctl, while the stopped run's tree still ran (pids %v)",
				time.Since(stopped).Round(time.Millisecond), running)
		}
		if time.Since(stopped) > 15*time.Second {
			t.Fatalf("15 s after SIGSTOP of poolctl, its tree still runs (pids %v)", running)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
