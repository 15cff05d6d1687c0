//go:build unix

package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/testkit"
)

// Knobs for longer runs of the SIGKILL tests (README: "Running a command
// on a seat").
const (
	killTrialsEnv = "ETCDPOOL_RUN_KILL_TRIALS" // trials per mode; default 5
	churnEnv      = "ETCDPOOL_RUN_CHURN"       // churn duration per mode; default 15s, one mode
)

// noCgroup makes the guard use its /proc fallback (guard_linux.go).
const noCgroup = "ETCDPOOL_RUN_NO_CGROUP=1"

// treeScript starts a forking child (a shell with a sleep of its own) and
// a grandchild in a session of its own (setsid), writes their pids, and
// waits.
const treeScript = `exec 2>/dev/null
echo $$ > "$D/leader.pid"
sh -c 'sleep 300 & echo $! > "$D/grandchild.pid"; echo $$ > "$D/child.pid"; wait' &
setsid sh -c 'echo $$ > "$D/setsid.pid"; exec sleep 300' &
wait`

// killModes are the guard's two ways of finding the tree.
var killModes = []struct {
	name string
	env  []string
}{
	{"cgroup where writable", nil},
	{"proc walk", []string{noCgroup}},
}

// sigkill SIGKILLs poolctl while its command has a forking child and a
// setsid'd grandchild, and measures how long until none of them runs.
func (e *env) sigkill(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux stops the command when poolctl is SIGKILLed")
	}
	trials := envInt(t, killTrialsEnv, 5)
	for _, m := range killModes {
		t.Run(m.name, func(t *testing.T) {
			var took []time.Duration
			for i := range trials {
				took = append(took, e.killOnce(t, i, m.env))
			}
			slices.Sort(took)
			t.Logf("SIGKILL of poolctl -> whole tree gone, %d trials: median %v, max %v", trials,
				took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
		})
	}
}

// killBound is how long the tree may take to die: generous for a shared,
// noisy machine, yet far below the 2 s lease TTL the seat outlives it by.
const killBound = 1500 * time.Millisecond

func (e *env) killOnce(t *testing.T, trial int, env []string) time.Duration {
	t.Helper()
	dir := t.TempDir()
	p := e.startEnv(t, dir, "k", env, "run", "kill", "--holder", "killed-"+strconv.Itoa(trial), "--", "sh", "-c", treeScript)
	pids := map[string]int{}
	for _, name := range []string{"leader", "child", "grandchild", "setsid"} {
		pids[name] = readPid(t, filepath.Join(dir, name+".pid"))
	}
	if sid(t, pids["setsid"]) == sid(t, pids["leader"]) {
		t.Fatal("the setsid'd grandchild shares the leader's session")
	}
	if env == nil && cgroupWritable() && !strings.Contains(readString(t, pids["setsid"], "cgroup"), "poolctl-run-") {
		t.Errorf("cgroup v2 is writable but the command runs outside a poolctl-run cgroup: %s", readString(t, pids["setsid"], "cgroup"))
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		var alive []string
		for name, pid := range pids {
			if !testkit.PidGone(pid) {
				alive = append(alive, name)
			}
		}
		took := time.Since(start)
		if len(alive) == 0 {
			return took
		}
		if took > killBound {
			t.Fatalf("%v after SIGKILL of poolctl, still running: %v (%v)", took, alive, pids)
		}
		time.Sleep(time.Millisecond)
	}
}

// sid is a process's session ID.
func sid(t *testing.T, pid int) string {
	t.Helper()
	s := readString(t, pid, "stat")
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return f[3] // state ppid pgrp session
}

func readString(t *testing.T, pid int, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cgroupWritable reports whether this process could make a cgroup v2
// child where it is, as the guard tries to.
func cgroupWritable() bool {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				dir := filepath.Join(mnt, p, "poolctl-probe-"+strconv.Itoa(os.Getpid()))
				if os.Mkdir(dir, 0o755) != nil {
					continue
				}
				_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
				_ = os.Remove(dir)
				if err == nil {
					return true
				}
			}
		}
	}
	return false
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, 15*time.Second, filepath.Base(path), func() bool {
		b, _ := os.ReadFile(path)
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		pid = n
		return err == nil && n > 0
	})
	return pid
}

func envInt(t *testing.T, key string, def int) int {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", key, v)
	}
	return n
}

// guardKilled SIGKILLs the guard (the leader's parent) instead of poolctl:
// the leader dies by its parent-death signal, poolctl kills the rest of
// the process group and, with a cgroup, the whole tree (without one the
// setsid'd grandchild is out of reach), says what happened, releases the
// seat and exits 1.
func (e *env) guardKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux has a guard process")
	}
	for _, m := range killModes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			p := e.startEnv(t, dir, "g", m.env, "run", "kill", "--holder", "guard-killed", "--", "sh", "-c", treeScript)
			pids := map[string]int{}
			for _, name := range []string{"leader", "child", "grandchild", "setsid"} {
				pids[name] = readPid(t, filepath.Join(dir, name+".pid"))
			}
			t.Cleanup(func() { _ = syscall.Kill(pids["setsid"], syscall.SIGKILL) })
			inCgroup := strings.Contains(readString(t, pids["setsid"], "cgroup"), "poolctl-run-")
			guard := parentOf(pids["leader"])
			if guard <= 1 || !strings.Contains(readString(t, guard, "cmdline"), "__guard") {
				t.Fatalf("the leader's parent %d is not the guard: %q", guard, readString(t, guard, "cmdline"))
			}
			if err := syscall.Kill(guard, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if code := p.exit(t); code != 1 || !strings.Contains(p.stderr(), "guard process died") {
				t.Fatalf("poolctl exited %d (want 1): %s", code, p.stderr())
			}
			for name, pid := range pids {
				if name == "setsid" && !inCgroup {
					continue
				}
				testkit.Eventually(t, killBound, name+" to die with the guard", func() bool { return testkit.PidGone(pid) })
			}
			if strings.Contains(e.ok("seats", "kill"), "guard-killed") {
				t.Error("the seat is still held after poolctl exited")
			}
		})
	}
}
