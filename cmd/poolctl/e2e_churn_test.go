//go:build unix

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/testkit"
)

// churnScript is one holder's command. It records its tree in $D/live:
// <tree>.leader holds the shell's pid, <tree>.setsid the pid of a sleeper
// it started in a session of its own. It runs for $1 tenths of a second.
const churnScript = `exec 2>/dev/null
T=$$
echo $$ > "$D/live/$T.leader"
setsid sh -c 'echo $$ > "$D/live/$1.setsid"; exec sleep 300' sh $T &
i=0; while [ $i -lt "$1" ]; do sleep 0.1; i=$((i+1)); done`

const (
	churnCapacity = 2
	churnHolders  = 4
)

// churn runs looping `poolctl run` holders on a pool of two seats with a
// 2 s TTL while a killer SIGKILLs a random poolctl about every second, and
// a sampler counts the command trees that have a live process. It must
// never count more than the capacity: a killed poolctl's tree must die
// before its seat, which outlives it by a TTL, is granted again.
func (e *env) churn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux stops the command when poolctl is SIGKILLed")
	}
	d, modes := 15*time.Second, killModes[:1]
	if v := os.Getenv(churnEnv); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", churnEnv, v)
		}
		modes = killModes
	}
	for i, m := range modes {
		t.Run(m.name, func(t *testing.T) { e.churnMode(t, fmt.Sprintf("churn%d", i), d, m.env) })
	}
}

// churnRun is one churn experiment.
type churnRun struct {
	e    *env
	pool string
	dir  string
	env  []string
	stop chan struct{}

	mu      sync.Mutex
	running map[*exec.Cmd]bool
	kills   int
	// killedHolding counts kills of a poolctl whose command ran.
	killedHolding int
	exits         map[int]int // exit code -> count
}

func (e *env) churnMode(t *testing.T, pool string, d time.Duration, env []string) {
	e.ok("pool", "create", pool, "--capacity", strconv.Itoa(churnCapacity), "--ttl", "2s")
	c := &churnRun{e: e, pool: pool, dir: t.TempDir(), env: env, stop: make(chan struct{}),
		running: map[*exec.Cmd]bool{}, exits: map[int]int{}}
	if err := os.Mkdir(filepath.Join(c.dir, "live"), 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for h := range churnHolders {
		wg.Go(func() { c.holder(t, h) })
	}
	wg.Go(c.killer)
	samples, most, over := c.sample(d)
	close(c.stop)
	c.interruptAll()
	wg.Wait()
	trees := len(c.files(".leader"))
	t.Logf("churn %v: %d holders, capacity %d, %d trees started, %d poolctl SIGKILLed (%d while their command ran), exits %v; %d samples, at most %d live trees",
		d, churnHolders, churnCapacity, trees, c.kills, c.killedHolding, c.exits, samples, most)
	if over != "" {
		t.Errorf("more live command trees than seats: %s", over)
	}
	if c.killedHolding < int(d/(5*time.Second)) || c.exits[0] == 0 {
		t.Errorf("the churn did too little to mean anything: %d kills of a running command, %d clean exits", c.killedHolding, c.exits[0])
	}
	testkit.Eventually(t, 10*time.Second, "every command tree to end", func() bool { return len(c.liveTrees()) == 0 })
}

// holder runs poolctl run in a loop until stop.
func (c *churnRun) holder(t *testing.T, h int) {
	for n := 0; ; n++ {
		select {
		case <-c.stop:
			return
		default:
		}
		cmd := c.e.command(t, c.dir, "run", c.pool, "--holder", fmt.Sprintf("h%d-%d", h, n), "--kill-grace", "1s",
			"--", "sh", "-c", churnScript, "sh", strconv.Itoa(3+rand.IntN(13)))
		cmd.Env = append(cmd.Env, c.env...)
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		c.mu.Lock()
		c.running[cmd] = true
		c.mu.Unlock()
		_ = cmd.Wait()
		c.mu.Lock()
		delete(c.running, cmd)
		c.exits[cmd.ProcessState.ExitCode()]++
		c.mu.Unlock()
	}
}

// killer SIGKILLs a poolctl every 0.5..1.5 s until stop: two times in
// three one whose command runs (found through the tree's leader: its
// parent is the guard, whose parent is poolctl), otherwise any.
func (c *churnRun) killer() {
	for {
		select {
		case <-c.stop:
			return
		case <-time.After(500*time.Millisecond + rand.N(time.Second)):
		}
		holding := c.holdingPids()
		c.mu.Lock()
		var victim *exec.Cmd
		for cmd := range c.running { // map order is random enough
			if victim == nil || rand.IntN(3) > 0 && holding[cmd.Process.Pid] {
				victim = cmd
			}
		}
		if victim != nil && victim.Process.Signal(syscall.SIGKILL) == nil {
			c.kills++
			if holding[victim.Process.Pid] {
				c.killedHolding++
			}
		}
		c.mu.Unlock()
	}
}

// holdingPids are the pids of the poolctl processes whose command runs.
func (c *churnRun) holdingPids() map[int]bool {
	out := map[int]bool{}
	for _, f := range c.files(".leader") {
		b, _ := os.ReadFile(f)
		if leader, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && !testkit.PidGone(leader) {
			out[parentOf(parentOf(leader))] = true
		}
	}
	return out
}

// parentOf is a process's parent pid, 0 if unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// interruptAll sends SIGTERM to every poolctl still running: queued ones
// give up, holders stop their command and release.
func (c *churnRun) interruptAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cmd := range c.running {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
}

// sample counts live trees every few milliseconds for d. over describes
// the first sample with more than the capacity.
func (c *churnRun) sample(d time.Duration) (samples, most int, over string) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		live := c.liveTrees()
		samples++
		most = max(most, len(live))
		if len(live) > churnCapacity && over == "" {
			over = fmt.Sprintf("at %s: %v", time.Now().Format("15:04:05.000"), live)
		}
	}
	return samples, most, over
}

// liveTrees maps each tree with a live process to its live pids.
func (c *churnRun) liveTrees() map[string][]int {
	live := map[string][]int{}
	for _, f := range append(c.files(".leader"), c.files(".setsid")...) {
		b, err := os.ReadFile(f)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil || testkit.PidGone(pid) {
			continue // being written, or dead
		}
		tree := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".leader"), ".setsid")
		live[tree] = append(live[tree], pid)
	}
	return live
}

func (c *churnRun) files(suffix string) []string {
	m, _ := filepath.Glob(filepath.Join(c.dir, "live", "*"+suffix))
	return m
}
