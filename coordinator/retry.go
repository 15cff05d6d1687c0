package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// retry calls f until it succeeds, fails permanently (etcdclient.Classify:
// permission denied, auth, bad request), ctx ends or the session ends,
// backing off with jitter between tries. It is for reads and idempotent writes made
// while a claimant waits, so that a leader election or a brief loss of
// connection delays a wait instead of failing it.
func retry(ctx context.Context, s *Session, f func() error) error {
	backoff := 50 * time.Millisecond
	for {
		err := f()
		if err == nil || etcdclient.IsPermanent(err) {
			return err // permanent errors (permission, bad input) end at once
		}
		// Jitter keeps claimants that failed together from retrying together.
		d := backoff/2 + rand.N(backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-s.Done():
			return s.lostErr()
		case <-time.After(d):
		}
		// Capped at 500 ms: a waiter resumes within about half a second of
		// etcd answering again (an election takes about 1 s), and a
		// thousand waiters retry at most 2000 times a second in all.
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
