//go:build unix

package cli

import (
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// drainSignals are the signals --drain-signal accepts.
var drainSignals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "TERM": syscall.SIGTERM,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "WINCH": syscall.SIGWINCH,
}

// completeDrainSignal parses --drain-signal: a name, with or without SIG.
func (o *runOptions) completeDrainSignal() error {
	if o.DrainSignal == "" {
		return nil
	}
	s, ok := drainSignals[strings.TrimPrefix(strings.ToUpper(o.DrainSignal), "SIG")]
	if !ok {
		return usageError("--drain-signal %q: want one of HUP, INT, QUIT, TERM, USR1, USR2, WINCH", o.DrainSignal)
	}
	o.drainSig = os.Signal(s)
	return nil
}

// refuseSuspend keeps job control from stopping poolctl while its command
// runs, until the returned func is called. The command and its guard run
// in process groups of their own, so Ctrl-Z (SIGTSTP to the terminal's
// foreground group) would stop poolctl alone: no keepalive would be sent,
// the seat would be granted to someone else after the TTL, and the command
// would run on without it (found by a review, 2026-12-05). So SIGTSTP is
// caught and answered with a warning, and SIGTTIN and SIGTTOU, which stop
// a process in the background that reads or writes the terminal, are
// ignored: a run in the background writes its lines to the terminal rather
// than stop. Called after the command started: an ignored signal is
// inherited across exec, and the command keeps the defaults. (restore
// does not bring SIGTTIN and SIGTTOU back to their defaults, which Go
// cannot do for a signal it was told to ignore: a later command of the same
// process would inherit them ignored. poolctl runs one command per
// process; tests run several.) SIGSTOP cannot be caught: on Linux the
// guard stops the command by the session's deadline then (run_deadline.go).
func (o *runOptions) refuseSuspend() (restore func()) {
	tstp := make(chan os.Signal, 1)
	o.g.env.Notify(tstp, syscall.SIGTSTP)
	signal.Ignore(syscall.SIGTTIN, syscall.SIGTTOU)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-tstp:
				o.logf("warning: not suspended (SIGTSTP): stopped, poolctl could not keep the seat while the command ran on; end the command with Ctrl-C, or stop it by its own means")
			}
		}
	}()
	return func() {
		o.g.env.StopNotify(tstp)
		signal.Reset(syscall.SIGTTIN, syscall.SIGTTOU)
		close(done)
	}
}
