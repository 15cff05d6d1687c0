//go:build unix

package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// termSignals are the signals Main turns into cancellation and run
// forwards to its command.
var termSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// group is run's command, started as the leader of its own process group so
// that signals reach everything it forks.
type group struct {
	cmd    *exec.Cmd
	pgid   int
	exited chan struct{} // closed once the leader has exited and been reaped
}

// pollInterval is how often stop checks whether the group is gone.
const pollInterval = 10 * time.Millisecond

// startGroup starts path in a new process group.
func startGroup(path string, argv, env []string, in io.Reader, out, errOut io.Writer) (*group, error) {
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

// stop ends the whole group: SIGTERM, then SIGKILL if anything is still
// running after grace. It returns what it did, for the user.
func (g *group) stop(grace time.Duration) string {
	if g.gone() {
		return "nothing was left running"
	}
	g.signal(syscall.SIGTERM)
	if g.waitGone(grace) {
		return "sent SIGTERM to the command's process group"
	}
	g.signal(syscall.SIGKILL)
	g.waitGone(grace)
	return fmt.Sprintf("the command's process group survived SIGTERM for %v and was sent SIGKILL", grace)
}

// gone reports whether the leader has exited and no other member runs.
func (g *group) gone() bool {
	select {
	case <-g.exited:
		return !groupAlive(g.pgid)
	default:
		return false
	}
}

// waitGone polls gone for up to d.
func (g *group) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !g.gone() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
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
