package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// drainLook is how soon after one of its instances starts draining the
// agent reads its pool, to take the instance back if its agent stops.
const drainLook = 50 * time.Millisecond

// regainQuiet is how long no instance of the agent must have been deleted
// for the next deletion to be repaired at once rather than after the
// backoff that repeated deletions have built up.
const regainQuiet = 10 * time.Second

// hold registers every instance in sess and keeps them registered until ctx
// ends or the session is lost. Instances that fail to register (a pool not
// created yet, etcd unreachable) are retried with backoff; instances held
// by another agent are left alone (see owner.go).
//
// An instance deleted while the session lives (by hand with etcdctl, or by
// DeregisterInstance in another process) is registered again: hold follows
// the pools of its instances and, after each deletion of one of them (or a
// resync of the event stream, which may hide one), reads them and
// registers what is missing. A lone deletion is repaired within a few
// hundred milliseconds; deletions that keep coming are met with growing
// delays, up to 5s. Every owner-check interval it reads them all, to find
// instances taken over by another agent. hold returns as soon as ctx ends,
// so the agent never undoes its own drain.
func (a *Agent) hold(ctx context.Context, sess *coordinator.Session) error {
	wctx, cancel := context.WithCancel(ctx)
	gone, stopped := a.watchInstances(wctx)
	defer func() { cancel(); <-stopped }()
	pending := slices.Clone(a.cfg.Instances) // to register unconditionally
	check := map[string]bool{}               // pools to read for missing or taken instances
	bo := regainPolicy.Backoff()
	var lastGone time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	owners := time.NewTicker(a.o.ownerInterval)
	defer owners.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			return nil
		case ch := <-gone:
			check[ch.pool] = true
			if ch.draining {
				// Its agent may be stopping (owner.go): look soon, and
				// leave the backoff that deletions build up alone.
				timer.Reset(drainLook)
				continue
			}
			if time.Since(lastGone) > regainQuiet {
				bo.Reset()
			}
			lastGone = time.Now()
			timer.Reset(bo.NextBackOff())
		case <-owners.C:
			for pool := range a.instancesByPool() {
				check[pool] = true
			}
			timer.Reset(0)
		case <-timer.C:
			if ctx.Err() != nil {
				return nil
			}
			var err error
			if pending, err = a.reconcile(ctx, sess, check, pending); err != nil {
				return err
			}
			if pending, err = a.register(ctx, sess, pending); err != nil {
				return err
			}
			a.setSession(sess, len(pending) == 0)
			if len(pending) > 0 || len(check) > 0 {
				timer.Reset(bo.NextBackOff())
			}
		}
	}
}

// register registers instances in sess and returns those that failed for
// a reason that may pass, a takeover that lost a race included. Those
// another agent holds and owner.go's rule leaves to it are recorded, not
// returned: reconcile finds them again once free. An invalid instance is
// an error.
func (a *Agent) register(ctx context.Context, sess *coordinator.Session, ins []config.Instance) ([]config.Instance, error) {
	var failed []config.Instance
	for _, in := range ins {
		err := a.registerOne(ctx, sess, in)
		var owned *coordinator.InstanceOwnedError
		switch {
		case err == nil:
			a.owned(refOf(in))
			a.o.log.Info("instance registered", "pool", in.Pool, "instance", in.ID, "lease", leaseHex(sess.Lease()))
		case errors.As(err, &owned) && a.takeoverReason(refOf(in), owned) != "":
			// A takeover that lost its compare-and-swap: the key moved to
			// another lease, or was written, since it was read; it is
			// read again and, if still allowed, taken over then.
			a.o.log.Warn("instance changed as it was taken over; retrying", "pool", in.Pool, "instance", in.ID,
				"owner", owned.Agent, "owner_lease", leaseHex(owned.Owner))
			failed = append(failed, in)
		case errors.As(err, &owned):
			a.foreignOwner(refOf(in), owned)
		case errors.Is(err, coordinator.ErrInvalid):
			return nil, fmt.Errorf("agent: instance %q of pool %q: %w", in.ID, in.Pool, err)
		case etcdclient.IsPermanent(err):
			return nil, fmt.Errorf("agent: register instance %q of pool %q: %w", in.ID, in.Pool,
				etcdclient.Op("write", coordinator.SegPrefix(a.co.Prefix(), in.Pool, coordinator.SegInstances)+in.ID, err))
		default:
			a.o.log.Warn("cannot register instance; retrying", "pool", in.Pool, "instance", in.ID, "err", err)
			a.writeFailed(refOf(in), sess.Lease())
			failed = append(failed, in)
		}
	}
	return failed, nil
}

// registerOne registers in under sess's lease or, when another lease holds
// it and owner.go's rule allows, takes it over from that lease.
func (a *Agent) registerOne(ctx context.Context, sess *coordinator.Session, in config.Instance) error {
	rctx, cancel := context.WithTimeout(ctx, a.o.requestTimeout)
	defer cancel()
	epoch, err := a.startEpoch(rctx, in)
	if err != nil {
		return err
	}
	if a.mayHaveWritten(refOf(in), sess.Lease()) {
		if got, err := a.co.GetInstance(rctx, in.Pool, in.ID); readable(err) && got.Lease == sess.Lease() {
			// This session's already: an earlier try whose answer was
			// lost wrote it, and an operator may have drained it since.
			// Written again it would read ready (found by a review,
			// 2026-12-05).
			return nil
		}
	}
	reg := coordinator.Instance{ID: in.ID, Addr: in.Address, Labels: in.Labels, Seats: in.Seats, Agent: a.name, Epoch: epoch, Started: a.started}
	_, err = a.co.RegisterInstance(rctx, in.Pool, sess.Lease(), reg)
	var owned *coordinator.InstanceOwnedError
	if !errors.As(err, &owned) {
		return err
	}
	a.ownerStopping(refOf(in), owned.Owner, owned.Stopping) // an agent started after the mark sees it here
	why := a.takeoverReason(refOf(in), owned)
	if why == "" {
		return err
	}
	a.o.log.Warn("taking over instance", "pool", in.Pool, "instance", in.ID, "reason", why,
		"from_agent", owned.Agent, "from_lease", leaseHex(owned.Owner), "lease", leaseHex(sess.Lease()))
	_, err = a.co.TakeOverInstance(rctx, in.Pool, owned, sess.Lease(), reg)
	return err
}

// reconcile reads the agent's instances in each pool in check and returns
// pending plus those that are missing or still bound to an earlier lease
// of this agent; those another agent holds are recorded. A pool whose
// instances cannot all be read stays in check. A read etcd refuses for
// good (permission denied) is an error: an agent that cannot see its
// instances can tell neither their deletion nor their takeover, and must
// not say it keeps them registered.
func (a *Agent) reconcile(ctx context.Context, sess *coordinator.Session, check map[string]bool, pending []config.Instance) ([]config.Instance, error) {
	for pool := range check {
		ok := true
		for _, in := range a.cfg.Instances {
			queued := func(x config.Instance) bool { return x.Pool == in.Pool && x.ID == in.ID }
			if in.Pool != pool || slices.ContainsFunc(pending, queued) {
				continue
			}
			again, err := a.needsRegistering(ctx, sess, in)
			if etcdclient.IsPermanent(err) {
				return pending, fmt.Errorf("agent: read instance %q of pool %q: %w", in.ID, in.Pool,
					etcdclient.Op("read", coordinator.SegPrefix(a.co.Prefix(), in.Pool, coordinator.SegInstances)+in.ID, err))
			}
			if err != nil {
				a.o.log.Warn("cannot read instance; retrying", "pool", pool, "instance", in.ID, "err", err)
				ok = false
			}
			if again {
				pending = append(pending, in)
			}
		}
		if ok {
			delete(check, pool)
		}
	}
	return pending, nil
}

// needsRegistering reads in and reports whether it must be registered
// again: it is missing, or bound to a lease that owner.go's rule lets this
// agent take it over from (an earlier lease of its own, say).
func (a *Agent) needsRegistering(ctx context.Context, sess *coordinator.Session, in config.Instance) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, a.o.requestTimeout)
	got, err := a.co.GetInstance(rctx, in.Pool, in.ID)
	cancel()
	switch {
	case errors.Is(err, coordinator.ErrInstanceNotFound), errors.Is(err, coordinator.ErrPoolNotFound):
		a.freed(refOf(in))
		a.o.log.Warn("instance missing while the lease lives; registering it", "pool", in.Pool, "instance", in.ID, "lease", leaseHex(sess.Lease()))
		return true, nil
	case errors.Is(err, coordinator.ErrNotInstance):
		// Overwritten with a value that is not an instance: write it again.
		// Under this agent's lease that repairs it; under another (or
		// none) registering fails as owned, and /readyz names it.
		a.o.log.Warn("instance value is corrupt; registering it again", "pool", in.Pool, "instance", in.ID, "err", err)
		return true, nil
	case !readable(err):
		return false, err
	case got.Lease == sess.Lease():
		// Ours; or a record of it that a newer etcdpool wrote under our
		// lease, which this version cannot read whole, left as it is.
		a.owned(refOf(in))
		return false, nil
	}
	owned := got.Refusal(in.Pool)
	a.ownerStopping(refOf(in), owned.Owner, owned.Stopping)
	if a.takeoverReason(refOf(in), owned) != "" {
		return true, nil
	}
	a.foreignOwner(refOf(in), owned)
	return false, nil
}

// watchInstances follows the pools of the agent's instances until ctx ends
// and sends a pool's name each time one of the agent's instances there is
// deleted or starts draining (its agent may be stopping: owner.go), or
// the event stream resyncs (a deletion may hide in the gap). The second
// channel is closed once every follower has stopped.
func (a *Agent) watchInstances(ctx context.Context) (<-chan poolChange, <-chan struct{}) {
	out := make(chan poolChange)
	var wg sync.WaitGroup
	for pool, ids := range a.instancesByPool() {
		events := a.co.Watch(ctx, pool)
		wg.Go(func() {
			for ev := range events {
				changed := ev.Type == coordinator.EventInstanceDown || ev.Type == coordinator.EventInstanceDraining
				if ev.Type != coordinator.EventResync && (!changed || !ids[ev.Instance]) {
					continue
				}
				select {
				case out <- poolChange{pool, ev.Type == coordinator.EventInstanceDraining}:
				case <-ctx.Done():
				}
			}
		})
	}
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	return out, stopped
}

// poolChange is what watchInstances sends: a pool to read, and whether
// the change was an instance starting to drain (else a deletion or a
// resync).
type poolChange struct {
	pool     string
	draining bool
}

// instancesByPool maps each pool of the agent's instances to their IDs.
func (a *Agent) instancesByPool() map[string]map[string]bool {
	mine := map[string]map[string]bool{}
	for _, in := range a.cfg.Instances {
		if mine[in.Pool] == nil {
			mine[in.Pool] = map[string]bool{}
		}
		mine[in.Pool][in.ID] = true
	}
	return mine
}

// readable reports whether GetInstance's err leaves a record of the
// instance to go by: none, or a record of it this version does not decode
// whole (a newer etcdpool's), not a value that is no record of it.
func readable(err error) bool {
	return err == nil || errors.Is(err, coordinator.ErrInvalid) && !errors.Is(err, coordinator.ErrNotInstance)
}
