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

// killWait is the least stop waits for a tree to end after SIGKILL before
// saying part of it still runs: the guard reports the tree gone once it
// has removed its cgroup too, which took about a second on these machines.
const killWait = 5 * time.Second

// stop ends the command and everything it started: SIGTERM, then SIGKILL if
// anything is still running after grace. Each value d received from cut
// (nil: none) brings SIGKILL forward to d from then, if that is sooner: the
// seat the grace relied on may be lost meanwhile (lossCut). It returns
// what it did, for the user.
func (g *group) stop(grace time.Duration, cut <-chan time.Duration) string {
	if g.gone() {
		return "nothing was left running"
	}
	g.terminate()
	start := time.Now()
	if g.waitGone(start.Add(grace), cut) {
		return "sent SIGTERM to the command's process group"
	}
	g.kill()
	how := fmt.Sprintf("the command's process group survived SIGTERM for %v and was sent SIGKILL", time.Since(start).Round(time.Millisecond))
	// SIGKILL takes a moment to end a tree, however short grace was (none
	// after a lease's end): wait at least killWait before saying it lived.
	if wait := max(grace, killWait); !g.waitGone(time.Now().Add(wait), nil) {
		how += fmt.Sprintf(", and part of it still ran %v later", wait)
	}
	return how
}

// waitGone polls gone until deadline, which each value d from cut brings
// forward to d from then.
func (g *group) waitGone(deadline time.Time, cut <-chan time.Duration) bool {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !g.gone() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case d, ok := <-cut:
			if !ok {
				cut = nil
				continue
			}
			if sooner := time.Now().Add(d); sooner.Before(deadline) {
				deadline = sooner
			}
		case <-tick.C:
		}
	}
	return true
}
