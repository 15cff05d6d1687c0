package agent

import (
	"context"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// drain marks every instance draining so that no new claim lands on it,
// waits up to the drain timeout for the seats held on them to be released,
// then deregisters them and revokes the lease.
func (a *Agent) drain(sess *coordinator.Session) {
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
	log := a.o.log.With("lease", leaseHex(sess.Lease()))
	log.Info("draining", "instances", len(a.cfg.Instances), "timeout", a.cfg.DrainTimeout.D())
	ctx := context.Background()
	for _, in := range a.cfg.Instances {
		rctx, cancel := context.WithTimeout(ctx, a.o.requestTimeout)
		_, err := a.co.SetInstanceState(rctx, in.Pool, in.ID, coordinator.InstanceDraining)
		cancel()
		if err != nil {
			log.Warn("cannot mark instance draining", "pool", in.Pool, "instance", in.ID, "err", err)
		}
	}
	if held := a.awaitIdle(sess); held > 0 {
		log.Warn("drain timeout passed with seats held; their holders will see their instance gone", "held", held)
	}
	for _, in := range a.cfg.Instances {
		rctx, cancel := context.WithTimeout(ctx, a.o.requestTimeout)
		err := a.co.DeregisterInstance(rctx, in.Pool, in.ID)
		cancel()
		if err != nil && sess.Err() == nil {
			log.Warn("cannot deregister instance; the lease revoke removes it", "pool", in.Pool, "instance", in.ID, "err", err)
		}
	}
	a.o.closeSession(sess)
	a.setSession(nil, false)
	log.Info("drained")
}

// awaitIdle polls until no seat is held on this agent's instances, the
// drain timeout passes or the session is lost, and returns the seats still
// held (-1 when unknown).
func (a *Agent) awaitIdle(sess *coordinator.Session) int {
	deadline := time.Now().Add(a.cfg.DrainTimeout.D())
	for {
		held := a.heldSeats(sess)
		if held == 0 || sess.Err() != nil {
			return 0
		}
		if !time.Now().Before(deadline) {
			return held
		}
		select {
		case <-sess.Done():
		case <-time.After(min(a.o.pollInterval, time.Until(deadline))):
		}
	}
}

// heldSeats counts the seats bound to this agent's instances; -1 when a
// pool cannot be read.
func (a *Agent) heldSeats(sess *coordinator.Session) int {
	n := 0
	for pool, ids := range a.instancesByPool() {
		ctx, cancel := context.WithTimeout(context.Background(), a.o.requestTimeout)
		seats, err := a.co.Seats(ctx, pool)
		cancel()
		if err != nil {
			a.o.log.Warn("cannot list seats while draining", "pool", pool, "lease", leaseHex(sess.Lease()), "err", err)
			return -1
		}
		for _, s := range seats {
			if ids[s.Instance] {
				n++
			}
		}
	}
	return n
}
