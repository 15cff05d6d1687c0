package agent

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/retry"
)

// drain marks every instance draining so that no new claim lands on it,
// waits up to the drain timeout for the seats held on them to be released,
// then deregisters them and revokes the lease. Each write is fenced by the
// session's lease: an instance another agent has taken over is left alone,
// its holders keep their seats, and the drain does not wait for them.
//
// Bounded whatever etcd does: the instances are marked, and deregistered,
// at once, each write within one request timeout, so that a drain with
// etcd unreachable takes the drain timeout and a few request timeouts,
// not two per instance (TestDrainBoundedWithEtcdUnreachable).
func (a *Agent) drain(sess *coordinator.Session) {
	a.mu.Lock()
	a.draining = true
	a.mu.Unlock()
	log := a.o.log.With("lease", leaseHex(sess.Lease()))
	log.Info("draining", "instances", len(a.cfg.Instances), "timeout", a.cfg.DrainTimeout.D())
	a.eachInstance(func(in config.Instance) { a.markDraining(log, sess, in) })
	switch held := a.awaitIdle(sess); {
	case held > 0:
		log.Warn("drain timeout passed with seats held; their holders will see their instance gone", "held", held)
	case held < 0:
		log.Warn("drain timeout passed, and the seats held could not be counted; any holders will see their instance gone")
	}
	a.eachInstance(func(in config.Instance) {
		if sess.Err() != nil {
			return // the lease is gone, or going, and its instances with it
		}
		rctx, cancel := context.WithTimeout(context.Background(), a.o.requestTimeout)
		err := a.co.DeregisterInstanceIfOwner(rctx, in.Pool, in.ID, sess.Lease())
		cancel()
		if err != nil && !a.leftAlone(log, in, err) && sess.Err() == nil {
			log.Warn("cannot deregister instance; the lease revoke removes it", "pool", in.Pool, "instance", in.ID, "err", err)
		}
	})
	a.o.closeSession(sess)
	a.setSession(nil, false)
	log.Info("drained")
}

// drainParallel is how many of a drain's writes are in flight at once.
const drainParallel = 16

// eachInstance runs f for every configured instance, drainParallel at a
// time, and returns when all have returned.
func (a *Agent) eachInstance(f func(config.Instance)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, drainParallel)
	for _, in := range a.cfg.Instances {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(in)
		})
	}
	wg.Wait()
}

// markDraining marks in draining if sess's lease holds it. A concurrent
// change of the key (an operator's poolctl drain) is retried with backoff
// within one request timeout.
func (a *Agent) markDraining(log *slog.Logger, sess *coordinator.Session, in config.Instance) {
	ctx, cancel := context.WithTimeout(context.Background(), a.o.requestTimeout)
	defer cancel()
	err := retry.Do(ctx, drainPolicy, func() error {
		_, err := a.co.SetInstanceStateIfOwner(ctx, in.Pool, in.ID, sess.Lease(), coordinator.InstanceDraining)
		if err == nil || errors.Is(err, coordinator.ErrConflict) {
			return err
		}
		return retry.Permanent(err)
	}, nil)
	if err != nil && !a.leftAlone(log, in, err) {
		log.Warn("cannot mark instance draining", "pool", in.Pool, "instance", in.ID, "err", err)
	}
}

// leftAlone reports whether err says in is not this agent's to write any
// more: another agent holds it (logged), or it is gone.
func (a *Agent) leftAlone(log *slog.Logger, in config.Instance, err error) bool {
	var owned *coordinator.InstanceOwnedError
	switch {
	case errors.As(err, &owned):
		a.foreignOwner(refOf(in), owned)
		log.Info("instance held by another agent; the drain leaves it and its seats alone",
			"pool", in.Pool, "instance", in.ID, "owner", owned.Agent, "owner_lease", leaseHex(owned.Owner))
		return true
	case errors.Is(err, coordinator.ErrInstanceNotFound), errors.Is(err, coordinator.ErrPoolNotFound):
		return true
	}
	return false
}

// awaitIdle polls until no seat is held on the instances this agent still
// holds, the drain timeout passes or the session is lost, and returns the
// seats still held (-1 when unknown). A drain timeout of 0 (poolagent dev)
// waits for nothing, and counts nothing.
func (a *Agent) awaitIdle(sess *coordinator.Session) int {
	if a.cfg.DrainTimeout.D() <= 0 {
		return 0
	}
	deadline := time.Now().Add(a.cfg.DrainTimeout.D())
	for {
		held := a.heldSeats(sess, deadline)
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

// heldSeats counts the seats bound to the agent's instances that sess's
// lease still holds; -1 when a pool cannot be read. Each poll reads only
// those instances (coordinator.InstanceLoads), whatever the size of their
// pools; a pool deleted meanwhile went with its seats. Its reads end at
// deadline, or a request timeout after the first, if sooner.
func (a *Agent) heldSeats(sess *coordinator.Session, deadline time.Time) int {
	n := 0
	stop := time.Now().Add(a.o.requestTimeout)
	if deadline.Before(stop) {
		stop = deadline
	}
	for pool, ids := range a.instancesByPool() {
		ctx, cancel := context.WithDeadline(context.Background(), stop)
		loads, err := a.co.InstanceLoads(ctx, pool, slices.Sorted(maps.Keys(ids))...)
		cancel()
		switch {
		case errors.Is(err, coordinator.ErrPoolNotFound):
			continue
		case err != nil:
			a.o.log.Warn("cannot count the seats held while draining", "pool", pool, "lease", leaseHex(sess.Lease()), "err", err)
			return -1
		}
		for _, l := range loads {
			if l.Lease == sess.Lease() {
				n += l.Bound
			}
		}
	}
	return n
}
