package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The guard is poolctl re-executed as `poolctl __guard PATH ARGV...` by run,
// between poolctl and the command. It exists so that the command and every
// process it starts die with poolctl, however poolctl dies:
//
//   - it is a child subreaper (PR_SET_CHILD_SUBREAPER), so every orphaned
//     descendant, setsid'd or not, is reparented to it and stays findable;
//   - it starts the command in a cgroup of its own when cgroup v2 is
//     writable (cgroup.kill then stops the whole tree atomically), and walks
//     /proc for its descendants otherwise;
//   - it reads a pipe only poolctl writes to: end of file means poolctl is
//     gone, and the guard kills the whole tree at once;
//   - the command itself gets PR_SET_PDEATHSIG=SIGKILL, in case the guard
//     is killed too.
//
//   - it stops the tree by the session's local deadline, which poolctl
//     sends it each time a keepalive moves it: a poolctl that is stopped
//     (SIGSTOP, a debugger) or hung sends no keepalive, and its seat can be
//     granted to another once the lease ends, while the command would run
//     on. The guard sends SIGTERM at the deadline and SIGKILL at the
//     deadline plus the grace poolctl gives (lossGrace: at most half the
//     session's margin, which the lease outlives the deadline by), as
//     poolctl itself would.
//
// Protocol. poolctl writes lines on fd 3: "signal N" (send N to the
// command's process group), "term" (SIGTERM to every process of the tree,
// once), "kill" (SIGKILL every process of the tree until none is left),
// "until T G" (stop the tree at T, in CLOCK_MONOTONIC nanoseconds, with G
// nanoseconds between SIGTERM and SIGKILL, unless a later "until" comes
// first). The guard writes lines on fd 4: "pid N MODE" or "error ERRNO
// MESSAGE" once (or "expired" alone, without starting the command, when
// the first deadline had passed), then "expired" if the deadline passed
// (and "killed" if SIGKILL followed), and "exit N" or "signal N" when the
// command's leader ends. It exits once no descendant
// is left, which poolctl sees as end of file on fd 4.

// guardArg is the hidden first argument that makes poolctl a guard.
const guardArg = "__guard"

// noCgroupEnv, when set to anything non-empty in run's environment, makes
// the guard use its /proc fallback even where cgroup v2 is writable.
const noCgroupEnv = "ETCDPOOL_RUN_NO_CGROUP"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

// rekillInterval is how often a killing guard looks for survivors.
const rekillInterval = 10 * time.Millisecond

// guard is the state of the guard process.
type guard struct {
	leader  int     // the command's pid and process group
	cg      *cgroup // nil: the /proc fallback
	status  io.Writer
	killing bool // SIGKILL everything until nothing is left
	termed  bool // SIGTERM sent to the tree
	// until is the session's local deadline and grace the time from it to
	// SIGKILL ("until"); expired is set once it has passed, after which no
	// later deadline is taken: the tree is on its way out, as poolctl's
	// session, which never moves a passed deadline, has ended too.
	until   int64 // CLOCK_MONOTONIC ns; 0: none told
	grace   time.Duration
	expired bool
	expiry  *time.Timer // fires at until, then at until+grace
}

// runGuard is the guard process's main. It returns its exit code.
func runGuard(args []string) int {
	// PR_SET_PDEATHSIG fires when the thread that forked exits: fork from
	// the main thread, locked for the life of the process.
	runtime.LockOSThread()
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "poolctl: internal guard mode: want PATH ARGV...")
		return ExitUsage
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	ctl, status := os.NewFile(3, "ctl"), os.NewFile(4, "status")
	// Survive the signals a terminal or a job kill would send us: poolctl
	// forwards what the command must get.
	signal.Notify(make(chan os.Signal, 1), termSignals...)
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		fmt.Fprintf(status, "error %d PR_SET_CHILD_SUBREAPER: %v\n", e, e)
		return ExitError
	}
	g := &guard{status: status}
	// poolctl wrote the session's deadline before it started the guard
	// (startGroup): a command whose deadline has passed (poolctl stopped
	// meanwhile) is never started.
	lines := bufio.NewScanner(ctl)
	if !lines.Scan() {
		return ExitError // poolctl is gone already: nothing to start
	}
	if g.command(lines.Text()); g.until != 0 && g.until <= monoNow() {
		fmt.Fprintln(status, "expired")
		return ExitError
	}
	if os.Getenv(noCgroupEnv) == "" {
		g.cg = newCgroup() // nil where cgroup v2 is not writable
	}
	pid, err := g.start(args[0], args[1:])
	if err != nil {
		var errno syscall.Errno
		errors.As(err, &errno)
		fmt.Fprintf(status, "error %d %v\n", int(errno), err)
		g.cg.remove()
		return ExitError
	}
	g.leader = pid
	fmt.Fprintf(status, "pid %d %s\n", pid, g.mode())
	return g.loop(readLines(lines))
}

// start forks the command in its own process group (and cgroup, when there
// is one), with SIGKILL as its parent-death signal.
func (g *guard) start(path string, argv []string) (int, error) {
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if g.cg != nil {
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = true, g.cg.fd
		pid, err := syscall.ForkExec(path, argv, attr)
		if !cgroupRefused(err) {
			return pid, err
		}
		// The cgroup refused the process; fall back to /proc.
		g.cg.remove()
		g.cg = nil
		attr.Sys.UseCgroupFD, attr.Sys.CgroupFD = false, 0
	}
	return syscall.ForkExec(path, argv, attr)
}

// cgroupRefused reports a fork error that may come from CLONE_INTO_CGROUP
// (no clone3, a cgroup that takes no processes, no permission) rather than
// from the command; the start is then retried without the cgroup.
func cgroupRefused(err error) bool {
	for _, e := range []error{syscall.EBUSY, syscall.EACCES, syscall.ENOSYS, syscall.EPERM, syscall.EOPNOTSUPP} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// readLines delivers poolctl's commands; the channel closes at end of file,
// that is when poolctl has exited or died. Its goroutine ends with the
// guard process.
func readLines(sc *bufio.Scanner) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// loop serves poolctl until no descendant is left.
func (g *guard) loop(ctl <-chan string) int {
	leader, empty := g.reap()
	tick := time.NewTicker(rekillInterval)
	defer tick.Stop()
	g.expiry = time.NewTimer(time.Hour)
	g.expiry.Stop()
	defer g.expiry.Stop()
	if g.until != 0 { // the first deadline, read before the command started
		g.expiry.Reset(time.Duration(g.until - monoNow()))
	}
	for {
		select {
		case line, ok := <-ctl:
			if !g.receive(line, ok) {
				ctl = nil
			}
		case ws := <-leader:
			fmt.Fprintln(g.status, waitLine(ws))
		case <-tick.C:
			if g.killing {
				g.kill()
			}
		case <-g.expiry.C:
			ctl = g.deadline(ctl)
		case <-empty:
			select {
			case ws := <-leader: // reaped just before the last one
				fmt.Fprintln(g.status, waitLine(ws))
			default:
			}
			g.cg.remove()
			return ExitOK
		}
	}
}

// receive handles one read of poolctl's lines: a command, or their end,
// when poolctl is gone and nothing may outlive it. It reports whether
// more may come.
func (g *guard) receive(line string, ok bool) bool {
	if !ok {
		g.kill()
		return false
	}
	g.command(line)
	return true
}

// command runs one line from poolctl.
func (g *guard) command(line string) {
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "signal":
		if n, err := strconv.Atoi(arg); err == nil {
			_ = syscall.Kill(-g.leader, syscall.Signal(n))
		}
	case "term":
		g.terminate()
	case "kill":
		g.kill()
	case "until":
		t, grace, _ := strings.Cut(arg, " ")
		until, err1 := strconv.ParseInt(t, 10, 64)
		ns, err2 := strconv.ParseInt(grace, 10, 64)
		if err1 != nil || err2 != nil || g.expired || until <= g.until {
			return
		}
		g.until, g.grace = until, time.Duration(ns)
		if g.expiry != nil { // else loop arms it
			g.expiry.Reset(time.Duration(until - monoNow()))
		}
	}
}

// terminate sends SIGTERM to every process of the tree, once: poolctl
// and the deadline may both ask for it.
func (g *guard) terminate() {
	if g.termed {
		return
	}
	g.termed = true
	_ = syscall.Kill(-g.leader, syscall.SIGTERM)
	for _, pid := range g.members() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
}

// deadline runs when the expiry timer fires: at the session's local
// deadline, unless poolctl told a later one meanwhile, it tells poolctl
// and sends SIGTERM; grace after the deadline, SIGKILL, and tells poolctl
// that too. Lines poolctl wrote before the timer fired are read first: a
// later deadline among them wins (select picks at random between a ready
// line and the fired timer). It returns ctl, nil once it has ended.
func (g *guard) deadline(ctl <-chan string) <-chan string {
	for pending := true; pending && ctl != nil && !g.expired; {
		select {
		case line, ok := <-ctl:
			if !g.receive(line, ok) {
				ctl = nil
			}
		default:
			pending = false
		}
	}
	now := monoNow()
	switch {
	case now < g.until: // a later deadline, or a wakeup ahead of the clock
		g.expiry.Reset(time.Duration(g.until - now))
	case !g.expired:
		g.expired = true
		fmt.Fprintln(g.status, "expired")
		g.terminate()
		g.expiry.Reset(time.Duration(g.until + int64(g.grace) - now))
	default:
		g.kill()
	}
	return ctl
}

// kill sends SIGKILL to the whole tree now, and again every rekillInterval
// until nothing is left (a process forked between a listing and the kill
// is reparented to us and found the next time). The tree is the cgroup's
// processes, killed at once by cgroup.kill, and our descendants as well:
// one moved to another cgroup (a systemd scope, say) is no longer the
// cgroup's, but still ours, a subreaper's (found by a review, 2026-12-05:
// such a process survived every kill and run released the seat).
func (g *guard) kill() {
	if g.expired && !g.killing {
		// Past the deadline something of the tree outlived SIGTERM (the
		// guard exits once nothing is left): SIGKILL, its own at the end
		// of the grace or poolctl's, is part of the deadline's stop.
		fmt.Fprintln(g.status, "killed")
	}
	g.killing = true
	_ = syscall.Kill(-g.leader, syscall.SIGKILL)
	if g.cg != nil {
		_ = g.cg.kill()
	}
	for _, pid := range descendants(os.Getpid()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// mode says how the guard finds the tree, for poolctl -v.
func (g *guard) mode() string {
	if g.cg != nil {
		return "cgroup " + g.cg.dir
	}
	return "subreaper, /proc walk"
}

// members lists the processes of the tree: the cgroup's and our
// descendants (see kill).
func (g *guard) members() []int {
	pids := descendants(os.Getpid())
	if g.cg != nil {
		if in, err := g.cg.procs(); err == nil {
			for _, pid := range in {
				if !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

// reap waits for every child, ours or reparented to us. It reports the
// leader's wait status, and closes empty when no child is left: as a
// subreaper, that means no descendant is left. Its goroutine ends then.
func (g *guard) reap() (leader <-chan syscall.WaitStatus, empty <-chan struct{}) {
	lc, ec := make(chan syscall.WaitStatus, 1), make(chan struct{})
	go func() {
		defer close(ec)
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			switch {
			case errors.Is(err, syscall.EINTR):
			case err != nil:
				return // ECHILD: nothing left
			case pid == g.leader:
				lc <- ws
			}
		}
	}()
	return lc, ec
}

// waitLine renders the leader's end for poolctl.
func waitLine(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return fmt.Sprintf("signal %d", int(ws.Signal()))
	}
	return fmt.Sprintf("exit %d", ws.ExitStatus())
}
