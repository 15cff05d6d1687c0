package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcdpool/etcdpool/coordinator"
)

// withSession runs f with the client's lease, borrowed (see sessions.go).
//
// A borrowed session ends when the replica cannot confirm the lease in
// time (its TimeToLive requests are late under load), not only when the
// lease is gone; and a lease with no more than the replica's margin left
// cannot be borrowed, although its owner may still renew it. The client,
// not the replica, holds the session: so when the borrow or f fails with
// ErrSessionExpired, withSession asks etcd; if the lease is alive it
// borrows it again and runs f once more. If the lease is alive but that
// fails so again, the answer is 503 unavailable, not 410: the session is
// not gone.
func (s *Server) withSession(ctx context.Context, h handle, principal string, f func(*coordinator.Session) error) error {
	for try := 0; ; try++ {
		sess, done, err := s.ss.borrow(ctx, h, principal)
		if err == nil {
			err = f(sess)
			done()
		}
		if !errors.Is(err, coordinator.ErrSessionExpired) {
			return err // a borrow refused otherwise too: the session deleted, etcd unreachable
		}
		alive, aerr := s.ss.alive(ctx, h.lease)
		switch {
		case aerr != nil:
			return fmt.Errorf("%w: cannot tell whether session %016x is alive: %v", ErrUnavailable, int64(h.lease), aerr)
		case !alive:
			s.ss.drop(h.lease)
			return err
		case try > 0:
			return fmt.Errorf("%w: session %016x is alive but this replica could not follow its lease in time: %v", ErrUnavailable, int64(h.lease), err)
		}
		s.log.Debug("borrowed lease lost track; borrowing again", "lease", fmt.Sprintf("%016x", int64(h.lease)), "err", err)
	}
}
