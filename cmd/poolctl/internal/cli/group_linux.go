package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// group is run's command, started by a guard process (guard_linux.go) that
// stops it and everything it started when poolctl ends, however it ends.
type group struct {
	guard  *exec.Cmd
	ctl    *os.File      // commands to the guard; closing it kills the tree
	exited chan struct{} // closed once the leader has exited and been reaped
	done   chan struct{} // closed once the guard is gone, and with it the tree
	code   int           // the leader's exit code; set before exited closes
	how    string        // how the guard finds the tree, for -v
	pid    int           // the command's pid and process group
	cgDir  string        // the command's cgroup; "" for none
	// expired is set when the guard stopped the tree at the session's
	// deadline ("until"), poolctl having sent no later one; killed when it
	// had to send SIGKILL at the end of the grace.
	expired, killed atomic.Bool
}

// closeWait bounds how long close waits for the guard: a process stuck in
// the kernel may take longer to die, and the guard goes on killing it
// after poolctl has exited.
const closeWait = 5 * time.Second

// startGroup starts path under a guard. The guard is poolctl itself
// (/proc/self/exe, which works even if the binary was replaced meanwhile)
// in its own process group, so that job-control signals meant for poolctl
// do not reach it.
func startGroup(path string, argv, env []string, in io.Reader, out, errOut io.Writer, first guardDeadline) (*group, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe", Args: append([]string{"poolctl", guardArg, path}, argv...),
		Env: env, Stdin: in, Stdout: out, Stderr: errOut,
		ExtraFiles:  []*os.File{ctlR, stW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		WaitDelay:   time.Second,
	}
	// The session's deadline is in the pipe before the guard can start the
	// command, so a poolctl stopped from here on leaves no command running
	// past it (found by a review, 2026-12-05: the first deadline went after
	// the guard's handshake).
	_, _ = io.WriteString(ctlW, first.line())
	err = cmd.Start()
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		return nil, fmt.Errorf("start the guard process: %w", err)
	}
	g := &group{guard: cmd, ctl: ctlW, exited: make(chan struct{}), done: make(chan struct{})}
	status := bufio.NewScanner(stR)
	if err := g.handshake(status); err != nil {
		ctlW.Close()
		stR.Close()
		_ = cmd.Wait()
		return nil, err
	}
	go g.follow(status, stR)
	return g, nil
}

// handshake reads the guard's first line: the command's pid, or why it
// could not be started.
func (g *group) handshake(status *bufio.Scanner) error {
	if !status.Scan() {
		return errors.New("the guard process ended before starting the command")
	}
	verb, arg, _ := strings.Cut(status.Text(), " ")
	switch verb {
	case "pid":
		pid, mode, _ := strings.Cut(arg, " ")
		g.pid, _ = strconv.Atoi(pid)
		g.cgDir, _ = strings.CutPrefix(mode, "cgroup ")
		if g.cgDir == mode {
			g.cgDir = ""
		}
		g.how = fmt.Sprintf("pid %s, guarded by pid %d: %s", pid, g.guard.Process.Pid, mode)
		return nil
	case "expired":
		return errPastDeadline
	case "error":
		n, msg, _ := strings.Cut(arg, " ")
		if errno, err := strconv.Atoi(n); err == nil && errno != 0 {
			return &os.SyscallError{Syscall: "exec", Err: syscall.Errno(errno)}
		}
		return errors.New(msg)
	}
	return fmt.Errorf("the guard process said %q", status.Text())
}

// follow reads the guard's reports until it exits. It owns stR and the
// guard's Wait; it ends when the guard does.
func (g *group) follow(status *bufio.Scanner, stR *os.File) {
	defer close(g.done)
	defer stR.Close()
	g.code = ExitError
	reported := false
	for status.Scan() {
		verb, arg, _ := strings.Cut(status.Text(), " ")
		switch verb {
		case "expired":
			g.expired.Store(true)
			continue
		case "killed":
			g.killed.Store(true)
			continue
		}
		n, err := strconv.Atoi(arg)
		if reported || err != nil || (verb != "exit" && verb != "signal") {
			continue
		}
		g.code = n
		if verb == "signal" {
			g.code = 128 + n
		}
		reported = true
		close(g.exited)
	}
	_ = g.guard.Wait()
	if !reported {
		g.salvage()
		g.code = guardDied // and so did the command (pdeathsig)
		close(g.exited)
	}
}

// salvage kills what poolctl can still find of the tree after its guard
// died: the command's process group, and the whole cgroup if there is one,
// which it then removes. Without a cgroup, a descendant that left the
// process group is out of reach.
func (g *group) salvage() {
	if g.pid > 0 {
		_ = syscall.Kill(-g.pid, syscall.SIGKILL)
	}
	if g.cgDir == "" {
		return
	}
	cg := &cgroup{dir: g.cgDir, fd: -1}
	_ = cg.kill()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(pollInterval) {
		if pids, err := cg.procs(); err != nil || len(pids) == 0 {
			break
		}
	}
	cg.remove()
}

// tell sends one line to the guard; a guard already gone needs nothing.
func (g *group) tell(line string) { _, _ = io.WriteString(g.ctl, line+"\n") }

// signal sends sig to the command's process group.
func (g *group) signal(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		g.tell(fmt.Sprintf("signal %d", int(s)))
	}
}

// terminate sends SIGTERM to every process of the tree.
func (g *group) terminate() { g.tell("term") }

// kill SIGKILLs every process of the tree until none is left.
func (g *group) kill() { g.tell("kill") }

// until tells the guard the session's local deadline: unless told a later
// one first, it sends the tree SIGTERM then, and SIGKILL d.grace later
// (guard_linux.go).
func (g *group) until(d guardDeadline) { _, _ = io.WriteString(g.ctl, d.line()) }

// line is d as the guard reads it: the deadline carried over to the
// machine's monotonic clock, which the guard reads too.
func (d guardDeadline) line() string {
	return fmt.Sprintf("until %d %d\n", monoNow()+int64(time.Until(d.at)), int64(d.grace))
}

// expiredAtDeadline reports whether the guard stopped the tree at the
// session's deadline (poolctl sent no later one: it was stopped, or hung,
// or its own watchdog fired at the same moment), and killedAtDeadline
// whether it had to send SIGKILL at the end of the grace.
func (g *group) expiredAtDeadline() bool { return g.expired.Load() }
func (g *group) killedAtDeadline() bool  { return g.killed.Load() }

// gone reports whether the leader and everything it started have ended.
func (g *group) gone() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// close kills whatever is left and waits for the guard. Closing the pipe
// is what a dead poolctl does too.
func (g *group) close() {
	g.ctl.Close()
	select {
	case <-g.done:
	case <-time.After(closeWait):
	}
}

// describe says how the command runs, for -v.
func (g *group) describe() string { return g.how }

// exitCode is the leader's exit code, 128+N if signal N killed it, the
// shell's convention, or guardDied. Read it after exited is closed.
func (g *group) exitCode() int { return g.code }
