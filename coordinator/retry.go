package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/retry"
)

// The coordinator's retry loops and the reasons for their numbers. Every
// loop backs off through internal/retry (doubling, ±50% jitter, so that
// claimants that failed together do not retry together); permanent errors
// (etcdclient.IsPermanent: permission denied, auth, bad request) end a loop
// at once, except reap's, which nobody waits on (ambiguous.go).
var (
	// waitRetry: reads and idempotent writes made while a claimant waits,
	// and the pool feed's reload. Capped at 500 ms: a waiter resumes
	// within about half a second of etcd answering again (an election
	// takes about 1 s), and a thousand waiters retry at most 2000 times a
	// second in all.
	waitRetry = retry.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	// releaseRetry: a Release whose answer was lost. The caller's ctx
	// bounds it; 1 s keeps a release during an election prompt.
	releaseRetry = retry.Policy{Initial: 50 * time.Millisecond, Max: time.Second}
	// reapRetry: cleanup after an ambiguous claim whose caller has gone.
	// Nobody waits on it, so it backs off further (5 s) while etcd is
	// unreachable; the session's lease bounds what it can leave behind.
	reapRetry = retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	// contentionRetry: claim txns that failed although the state they were
	// planned on was fresh (other claimants won the slots), from the third
	// failure on. The next try plans on the failed txn's own read of the
	// pool, so the first waits are short; they start at 4 ms because each
	// failed try costs a read of the whole pool, and at 64 contenders on 16
	// seats shorter waits cost more in failed txns than they gain.
	contentionRetry = retry.Policy{Initial: 4 * time.Millisecond, Max: 128 * time.Millisecond}
	// casRetry: SetInstanceState's read-modify-write of an instance that
	// its agent rewrites meanwhile (a heartbeat, a drain).
	casRetry = retry.Policy{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond}
)

// withRetry calls f until it succeeds, fails permanently, ctx ends or the
// session ends, backing off by waitRetry and counting each retry as op on
// pool (Metrics.Retry). It is for reads and idempotent writes made while a
// claimant waits, so that a leader election or a brief loss of connection
// delays a wait instead of failing it.
func (c *Coordinator) withRetry(ctx context.Context, s *Session, pool, op string, f func() error) error {
	b := waitRetry.Backoff()
	for {
		err := f()
		if err == nil || etcdclient.IsPermanent(err) {
			return err // permanent errors (permission, bad input) end at once
		}
		if !c.pause(ctx, s.Done(), b, pool, op, err) {
			if ctx.Err() != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return s.lostErr()
		}
	}
}

// backoffs yields the waits of a retry loop (retry.Policy.Backoff).
type backoffs interface{ NextBackOff() time.Duration }

// pause counts one retry of op on pool (retried), then waits b's next
// backoff. It reports false when ctx or stop (nil: none) ended first.
func (c *Coordinator) pause(ctx context.Context, stop <-chan struct{}, b backoffs, pool, op string, cause error) bool {
	wait := b.NextBackOff()
	c.retried(pool, op, wait, cause)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// retried makes one retry visible: the Retry metric, and a debug log line
// with its cause.
func (c *Coordinator) retried(pool, op string, wait time.Duration, cause error) {
	c.metrics.Retry(pool, op, wait)
	c.log.Debug("retry", "pool", pool, "op", op, "wait", wait, "err", cause)
}
