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
)

// regainQuiet is how long no instance of the agent must have been deleted
// for the next deletion to be repaired at once rather than after the
// backoff that repeated deletions have built up.
const regainQuiet = 10 * time.Second

// hold registers every instance in sess and keeps them registered until ctx
// ends or the session is lost. Instances that fail to register (a pool not
// created yet, etcd unreachable) are retried with backoff.
//
// An instance deleted while the session lives (by hand with etcdctl, or by
// DeregisterInstance in another process) is registered again: hold follows
// the pools of its instances and, after each deletion of one of them (or a
// resync of the event stream, which may hide one), lists the pool and
// registers what is missing. A lone deletion is repaired within a few
// hundred milliseconds; deletions that keep coming are met with growing
// delays, up to 5s. hold returns as soon as ctx ends, so the agent never
// undoes its own drain.
func (a *Agent) hold(ctx context.Context, sess *coordinator.Session) error {
	wctx, cancel := context.WithCancel(ctx)
	gone, stopped := a.watchInstances(wctx)
	defer func() { cancel(); <-stopped }()
	pending := slices.Clone(a.cfg.Instances) // to register unconditionally
	check := map[string]bool{}               // pools to list for missing instances
	bo := newBackoff(200*time.Millisecond, 5*time.Second)
	var lastGone time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			return nil
		case pool := <-gone:
			check[pool] = true
			if time.Since(lastGone) > regainQuiet {
				bo.reset()
			}
			lastGone = time.Now()
			timer.Reset(bo.next())
		case <-timer.C:
			if ctx.Err() != nil {
				return nil
			}
			var err error
			pending = a.missing(ctx, sess, check, pending)
			if pending, err = a.register(ctx, sess, pending); err != nil {
				return err
			}
			a.setSession(sess, len(pending) == 0)
			if len(pending) > 0 || len(check) > 0 {
				timer.Reset(bo.next())
			}
		}
	}
}

// register registers instances in sess and returns those that failed for
// a reason that may pass. An invalid instance is an error.
func (a *Agent) register(ctx context.Context, sess *coordinator.Session, ins []config.Instance) ([]config.Instance, error) {
	var failed []config.Instance
	for _, in := range ins {
		rctx, cancel := context.WithTimeout(ctx, a.o.requestTimeout)
		_, err := a.co.RegisterInstance(rctx, in.Pool, sess.Lease(), coordinator.Instance{
			ID: in.ID, Addr: in.Address, Labels: in.Labels, Seats: in.Seats, Agent: a.name,
		})
		cancel()
		switch {
		case err == nil:
			a.o.log.Info("instance registered", "pool", in.Pool, "instance", in.ID, "lease", leaseHex(sess.Lease()))
		case errors.Is(err, coordinator.ErrInvalid):
			return nil, fmt.Errorf("agent: instance %q of pool %q: %w", in.ID, in.Pool, err)
		default:
			a.o.log.Warn("cannot register instance; retrying", "pool", in.Pool, "instance", in.ID, "err", err)
			failed = append(failed, in)
		}
	}
	return failed, nil
}

// missing lists each pool in check and returns pending plus the agent's
// instances that are not registered there. A pool that cannot be read
// stays in check; a pool that does not exist has none registered.
func (a *Agent) missing(ctx context.Context, sess *coordinator.Session, check map[string]bool, pending []config.Instance) []config.Instance {
	for pool := range check {
		rctx, cancel := context.WithTimeout(ctx, a.o.requestTimeout)
		ins, err := a.co.Instances(rctx, pool)
		cancel()
		if err != nil && !errors.Is(err, coordinator.ErrPoolNotFound) {
			a.o.log.Warn("cannot list instances; retrying", "pool", pool, "err", err)
			continue
		}
		delete(check, pool)
		for _, in := range a.cfg.Instances {
			listed := func(x coordinator.Instance) bool { return x.ID == in.ID }
			queued := func(x config.Instance) bool { return x.Pool == in.Pool && x.ID == in.ID }
			if in.Pool != pool || slices.ContainsFunc(ins, listed) || slices.ContainsFunc(pending, queued) {
				continue
			}
			a.o.log.Warn("instance missing while the lease lives; registering it again",
				"pool", pool, "instance", in.ID, "lease", leaseHex(sess.Lease()))
			pending = append(pending, in)
		}
	}
	return pending
}

// watchInstances follows the pools of the agent's instances until ctx ends
// and sends a pool's name each time one of the agent's instances there is
// deleted, or the event stream resyncs (a deletion may hide in the gap).
// The second channel is closed once every follower has stopped.
func (a *Agent) watchInstances(ctx context.Context) (<-chan string, <-chan struct{}) {
	out := make(chan string)
	var wg sync.WaitGroup
	for pool, ids := range a.instancesByPool() {
		events := a.co.Watch(ctx, pool)
		wg.Go(func() {
			for ev := range events {
				if ev.Type != coordinator.EventResync && (ev.Type != coordinator.EventInstanceDown || !ids[ev.Instance]) {
					continue
				}
				select {
				case out <- pool:
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
