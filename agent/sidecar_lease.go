package agent

import (
	"fmt"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// The app's stop while the sidecar is cut off from etcd. When the seat is
// lost the sidecar fails /readyz, and the kubelet, whose liveness probe of
// the app is /readyz, stops the app within AppStopWithin. Cut off from
// etcd, the sidecar learns of the loss only at its session's local
// deadline, which the lease outlives by the session's margin alone
// (TTL/10, at least 500 ms): an app that takes longer to stop would run
// on after its seat could be granted to another pod. So while it holds
// the seat, /readyz fails once the lease could end within AppStopWithin,
// whether or not the lease in fact still lives.

// holding records the session of the seat now held.
func (s *Sidecar) holding(sess *coordinator.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess, s.risky = sess, false
}

// leaseAtRisk fails /readyz while the held seat's lease could end within
// AppStopWithin: the lease's earliest end on the server, the send of its
// last answered keepalive plus the TTL (Session.Deadline plus its margin),
// is nearer than that. The kubelet then stops the app by the time the
// lease can end, and so before the seat can be granted to anyone else.
// Keepalives answered on time keep that end at least 2/3 of the TTL away,
// farther than AppStopWithin (at most TTL/2), so they never fail it; one
// answered later passes /readyz again. Nil when AppStopWithin is 0.
func (s *Sidecar) leaseAtRisk() error {
	lead := s.cfg.AppStopWithin.D()
	s.mu.Lock()
	defer s.mu.Unlock()
	if lead <= 0 || s.sess == nil {
		return nil
	}
	end := s.sess.Deadline().Add(s.sess.Margin())
	left := time.Until(end)
	if left >= lead {
		if s.risky {
			s.o.log.Info("keepalives answered again; /readyz passes", "pool", s.cfg.Pool, "lease", leaseHex(s.sess.Lease()))
		}
		s.risky = false
		return nil
	}
	err := fmt.Errorf("seat held, but etcd has not answered a keepalive in time: its lease can end in %v, sooner than the app stops (appStopWithin %v)",
		max(left, 0).Round(time.Millisecond), lead)
	if !s.risky {
		s.o.log.Warn("failing /readyz so that the app stops before the lease can end", "pool", s.cfg.Pool, "lease", leaseHex(s.sess.Lease()), "err", err)
	}
	s.risky = true
	return err
}
