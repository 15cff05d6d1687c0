//go:build unix

package cli

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// termSignals are the signals Main turns into cancellation and run
// forwards to its command.
var termSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// pollInterval is how often stop checks whether the group is gone.
const pollInterval = 10 * time.Millisecond

// stop ends the command and everything it started: SIGTERM, then SIGKILL if
// anything is still running after grace. It returns what it did, for the
// user.
func (g *group) stop(grace time.Duration) string {
	if g.gone() {
		return "nothing was left running"
	}
	g.terminate()
	if g.waitGone(grace) {
		return "sent SIGTERM to the command's process group"
	}
	g.kill()
	g.waitGone(grace)
	return fmt.Sprintf("the command's process group survived SIGTERM for %v and was sent SIGKILL", grace)
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
