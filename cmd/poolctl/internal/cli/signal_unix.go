//go:build unix

package cli

import (
	"os"
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
