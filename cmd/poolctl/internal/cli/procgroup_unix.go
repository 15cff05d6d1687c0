//go:build unix && !linux

package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// group is run's command, started as the leader of its own process group so
// that signals reach everything it forks. Without Linux's subreapers and
// cgroups nothing stops it if poolctl is killed with SIGKILL, and a
// descendant that leaves the process group escapes stop.
type group struct {
	cmd    *exec.Cmd
	pgid   int
	exited chan struct{} // closed once the leader has exited and been reaped
}

// startGroup starts path in a new process group.
func startGroup(path string, argv, env []string, in io.Reader, out, errOut io.Writer, _ guardDeadline) (*group, error) {
	cmd := &exec.Cmd{
		Path: path, Args: argv, Env: env, Stdin: in, Stdout: out, Stderr: errOut,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		// Output pipes (only when out is not a file) may be held open by
		// a background grandchild; do not let that hide the exit.
		WaitDelay: time.Second,
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &group{cmd: cmd, pgid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(g.exited)
	}()
	return g, nil
}

// signal sends sig to every process in the group.
func (g *group) signal(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-g.pgid, s)
	}
}

func (g *group) terminate() { g.signal(syscall.SIGTERM) }
func (g *group) kill()      { g.signal(syscall.SIGKILL) }

// gone reports whether the leader has exited and no other member runs.
func (g *group) gone() bool {
	select {
	case <-g.exited:
		return !groupAlive(g.pgid)
	default:
		return false
	}
}

// close waits for the leader; stop has already ended the group.
func (g *group) close() { <-g.exited }

// describe says how the command runs, for -v.
func (g *group) describe() string {
	return fmt.Sprintf("pid %d, in its own process group (no guard on this system)", g.pgid)
}

// exitCode is the leader's exit code, 128+N if signal N killed it, the
// shell's convention.
func (g *group) exitCode() int {
	st := g.cmd.ProcessState
	if st == nil {
		return ExitError
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// until does nothing: only Linux has a guard process to stop the command
// at the session's deadline when poolctl cannot (README, Known limits).
func (g *group) until(guardDeadline) {}

// expiredAtDeadline and killedAtDeadline are false: see until.
func (g *group) expiredAtDeadline() bool { return false }
func (g *group) killedAtDeadline() bool  { return false }
