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
	for {
		gone := testkit.PidGone(pids["leader"]) && testkit.PidGone(pids["child"])
		if gone {
			break
		}
		if exists(next) {
			t.Fatalf("the seat went to the waiter %v after SIGSTOP of poolctl, while the stopped run's command still ran (leader gone: %v, child gone: %v)",
				time.Since(stopped).Round(time.Millisecond), testkit.PidGone(pids["leader"]), testkit.PidGone(pids["child"]))
		}
		if time.Since(stopped) > 15*time.Second {
			t.Fatal("15 s after SIGSTOP of poolctl, its command still runs")
		}
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(stopped)
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
	if code := p.exit(t); code != 7 || !strings.Contains(p.stderr(), "its guard stopped the command") {
		t.Errorf("the resumed run exited %d (want 7, saying its guard stopped the command): %s", code, p.stderr())
	}
	return took, slack
}
