package cli

import (
	"sync"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// deadlineFeed carries run's session deadline to the command's guard
// (guard_linux.go), so that the command is stopped by the deadline even
// when poolctl cannot stop it: stopped by SIGSTOP or a debugger, or hung.
// Such a poolctl sends no keepalive; its lease ends, and its seat can be
// granted to another, a margin after the deadline.
type deadlineFeed struct {
	mu     sync.Mutex
	latest time.Time
	moved  chan struct{} // 1-buffered: latest changed
}

func newDeadlineFeed() *deadlineFeed { return &deadlineFeed{moved: make(chan struct{}, 1)} }

// set is the session's WithDeadlineMoved hook: it must not block.
func (f *deadlineFeed) set(d time.Time) {
	f.mu.Lock()
	f.latest = d
	f.mu.Unlock()
	select {
	case f.moved <- struct{}{}:
	default:
	}
}

// follow tells grp the session's deadline now and each time it moves,
// with the grace a command gets past it (lossGrace), until the returned
// func is called.
func (f *deadlineFeed) follow(grp *group, sess *coordinator.Session, grace time.Duration) (stop func()) {
	grace = lossGrace(coordinator.ErrLocalDeadline, sess, grace)
	grp.until(sess.Deadline(), grace)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-f.moved:
				f.mu.Lock()
				d := f.latest
				f.mu.Unlock()
				grp.until(d, grace)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
