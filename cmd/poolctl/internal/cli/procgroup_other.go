//go:build !unix

package cli

import (
	"errors"
	"io"
	"os"
	"time"
)

// termSignals are the signals Main turns into cancellation.
var termSignals = []os.Signal{os.Interrupt}

// group is unsupported here: run needs Unix process groups.
type group struct{ exited chan struct{} }

func startGroup(string, []string, []string, io.Reader, io.Writer, io.Writer, guardDeadline) (*group, error) {
	return nil, errors.New("run needs Unix process groups and is not supported on this platform")
}

func (g *group) signal(os.Signal) {}
func (g *group) stop(time.Duration, <-chan time.Duration) string {
	return ""
}
func (g *group) exitCode() int           { return ExitError }
func (g *group) close()                  {}
func (g *group) gone() bool              { return true }
func (g *group) describe() string        { return "" }
func (g *group) until(guardDeadline)     {}
func (g *group) expiredAtDeadline() bool { return false }
func (g *group) killedAtDeadline() bool  { return false }
func (g *group) kill()                   {}
func (g *group) waitGone(time.Time, <-chan time.Duration) bool {
	return true
}

// killWait is procgroup_stop.go's: guardStopped's wait, never reached
// here (there is no guard).
const killWait = 0
