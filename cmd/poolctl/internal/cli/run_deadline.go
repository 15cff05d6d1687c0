package cli

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// deadlineFeed tells run that its session's deadline moved, so that the
// command's guard (guard_linux.go) is told the new one: the command is then
// stopped by the deadline even when poolctl cannot stop it, stopped by
// SIGSTOP or a debugger, or hung. Such a poolctl sends no keepalive; its
// lease ends, and its seat can be granted to another, a margin after the
// deadline. The deadline itself is the session's (Session.Deadline).
type deadlineFeed struct {
	moved chan struct{} // 1-buffered: the deadline moved
}

func newDeadlineFeed() *deadlineFeed { return &deadlineFeed{moved: make(chan struct{}, 1)} }

// set is the session's WithDeadlineMoved hook: it must not block.
func (f *deadlineFeed) set(time.Time) {
	select {
	case f.moved <- struct{}{}:
	default:
	}
}

// errPastDeadline is startGroup's refusal when the session's deadline had
// passed before the guard could start the command (poolctl stopped
// meanwhile): the seat may be someone else's already.
var errPastDeadline = errors.New("the session's local deadline passed before the command started")

// errLocalDeadlinePassed is the loss of a seat whose session's deadline passed
// before its watchdog ended the session.
var errLocalDeadlinePassed = fmt.Errorf("%w: %w", coordinator.ErrSessionExpired, coordinator.ErrLocalDeadline)

// guardDeadline is the session's local deadline as the guard is told it:
// SIGTERM at, SIGKILL grace later, as poolctl would (lossGrace).
type guardDeadline struct {
	at    time.Time
	grace time.Duration
}

// deadlineOf is sess's deadline now, with the grace a command whose run
// uses killGrace gets past it.
func deadlineOf(sess *coordinator.Session, killGrace time.Duration) guardDeadline {
	return guardDeadline{at: sess.Deadline(), grace: lossGrace(coordinator.ErrLocalDeadline, sess, killGrace)}
}

// follow tells grp the session's deadline each time it moves, until the
// returned func is called. startGroup told the guard the first one; a
// move since then has left its signal in f.moved.
func (f *deadlineFeed) follow(grp *group, sess *coordinator.Session, killGrace time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-f.moved:
				grp.until(deadlineOf(sess, killGrace))
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// stoppedPastDeadline follows sess and reports, once the session has
// ended, whether this process noticed the end well past its deadline
// (more than half the margin): it was stopped (SIGSTOP) or hung then,
// since the session's watchdog fires at the deadline, as when etcd is
// only cut off. Before the session ends it reports whether the deadline
// is that far past already (the watchdog has not run yet).
func stoppedPastDeadline(sess *coordinator.Session) (stopped func() bool) {
	var late atomic.Bool
	seen := make(chan struct{})
	go func() {
		<-sess.Done()
		late.Store(time.Since(sess.Deadline()) > sess.Margin()/2)
		close(seen)
	}()
	return func() bool {
		select {
		case <-sess.Done():
			<-seen
			return late.Load()
		default: // its watchdog has not run yet: stalled, if well past the deadline
			return time.Since(sess.Deadline()) > sess.Margin()/2
		}
	}
}
