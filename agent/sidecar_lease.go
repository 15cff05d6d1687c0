package agent

import (
	"fmt"
	"time"

	"github.com/etcdpool/etcdpool/config"
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
// Keepalives whose round trips take less than TTL/12 each never fail it
// (config.MaxAppStopWithin); once one is answered, it passes again. Nil
// when AppStopWithin is 0.
func (s *Sidecar) leaseAtRisk() error {
	lead := s.cfg.AppStopWithin.D()
	s.mu.Lock()
	sess, was := s.sess, s.risky
	if lead <= 0 || sess == nil {
		s.mu.Unlock()
		return nil
	}
	left := time.Until(sess.Deadline().Add(sess.Margin()))
	s.risky = left < lead
	s.mu.Unlock()
	log := s.o.log.With("pool", s.cfg.Pool, "lease", leaseHex(sess.Lease()))
	if left >= lead {
		if was {
			log.Info("keepalives answered again; /readyz passes")
		}
		return nil
	}
	err := fmt.Errorf("seat held, but etcd has not answered a keepalive in time: its lease can end in %v, sooner than the app stops (appStopWithin %v)",
		max(left, 0).Round(time.Millisecond), lead)
	if !was {
		log.Warn("failing /readyz so that the app stops before the lease can end", "err", err)
	}
	return err
}

// leaseFits reports why a resumed session's lease, whose TTL is its own
// (the previous run's sidecar.ttl), cannot keep the rule above, or nil: its
// TTL allows AppStopWithin, as config validation checks for a new one.
func (s *Sidecar) leaseFits(sess *coordinator.Session) error {
	if most := config.MaxAppStopWithin(sess.TTL()); s.cfg.AppStopWithin.D() > most {
		return fmt.Errorf("the lease's TTL %v allows appStopWithin up to %v, not %v: /readyz would fail while keepalives are answered", sess.TTL(), most, s.cfg.AppStopWithin)
	}
	return nil
}
