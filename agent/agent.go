package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/retry"
)

// Agent registers a host's instances under one lease, keeps them
// registered across lost leases, and drains them when stopped.
type Agent struct {
	co   *coordinator.Coordinator
	cfg  config.Agent
	o    options
	name string

	mu         sync.Mutex
	sess       *coordinator.Session // nil between sessions
	registered bool                 // every instance registered in sess
	draining   bool
	own        ownership
	epoch      int64     // coordinator.Instance.Epoch of its registrations; 0 until read (owner.go)
	started    time.Time // coordinator.Instance.Started of its registrations
}

// Status is the agent's state as its health endpoints report it.
type Status struct {
	// Lease is the current session's lease; 0 between sessions.
	Lease clientv3.LeaseID `json:"lease"`
	// LeaseAlive is true while the session's lease is kept alive.
	LeaseAlive bool `json:"leaseAlive"`
	// Registered is true while every instance is registered in the
	// session: none is missing, none is held by another agent.
	Registered bool `json:"registered"`
	// Foreign describes the instances another agent's lease holds (taken
	// over, or registered before this agent started); the agent leaves
	// them alone until their keys are gone.
	Foreign []string `json:"foreign,omitempty"`
	// Draining is true from the start of the drain.
	Draining bool `json:"draining"`
}

// New returns an agent for cfg's instances. cfg must have passed
// config.Validate.
func New(co *coordinator.Coordinator, cfg config.Agent, opts ...Option) *Agent {
	name := cfg.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	return &Agent{co: co, cfg: cfg, o: buildOptions(opts), name: name, own: newOwnership(), started: time.Now().UTC()}
}

// Status returns a snapshot of the agent's state.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{Draining: a.draining, Foreign: a.foreignList()}
	st.Registered = a.registered && len(st.Foreign) == 0 && len(a.own.missing) == 0
	if a.sess != nil {
		st.Lease, st.LeaseAlive = a.sess.Lease(), a.sess.Err() == nil
	}
	return st
}

// Run creates the configured pools that are missing, registers the
// instances and keeps them registered until ctx ends: when the lease is
// lost (an etcd outage, a long partition) it opens a new session and
// registers again, with backoff, and an instance deleted by someone else
// while the lease lives is registered again (see hold). It never writes an
// instance key another agent's lease holds, except to take it over as
// owner.go describes. When ctx ends it drains (see drain) and returns nil.
// It returns an error only for a configuration etcd refuses, or a request
// etcd refuses for good (permission denied, authentication failed: see
// etcdclient.Classify); what may pass is retried.
func (a *Agent) Run(ctx context.Context) error {
	if err := a.createPools(ctx); err != nil {
		return err
	}
	for {
		sess, err := a.o.openSession(ctx, a.co.Client(), a.cfg.TTL.D())
		if err != nil {
			if ctx.Err() != nil {
				return nil // stopped between sessions: nothing is registered
			}
			return fmt.Errorf("agent: %w", err)
		}
		a.addLease(sess.Lease())
		a.setSession(sess, false)
		if err := a.hold(ctx, sess); err != nil {
			// Refused for good (a pool's permission, say): stop as on
			// shutdown, draining first, so that the holders of the other
			// instances get the drain timeout rather than lose their
			// seats with the lease at once.
			a.o.log.Error("etcd refused the agent for good; draining and stopping", "err", err)
			a.drain(sess)
			return err
		}
		if ctx.Err() != nil {
			a.drain(sess)
			return nil
		}
		a.o.log.Warn("lease lost; registering again", "lease", leaseHex(sess.Lease()), "err", sess.Err())
		a.o.onSessionLost()
		a.setSession(nil, false)
	}
}

func (a *Agent) setSession(sess *coordinator.Session, registered bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sess, a.registered = sess, registered
}

// createPools creates the configured pools that do not exist, retrying
// while etcd is unreachable. An existing pool is left as it is.
func (a *Agent) createPools(ctx context.Context) error {
	for _, p := range a.cfg.Pools {
		if err := a.createPool(ctx, p.Name, p.Spec()); err != nil {
			return err
		}
	}
	return nil
}

func (a *Agent) createPool(ctx context.Context, name string, spec coordinator.PoolSpec) error {
	err := retry.Do(ctx, reachPolicy, func() error {
		rctx, cancel := context.WithTimeout(ctx, a.o.requestTimeout)
		defer cancel()
		_, err := a.co.CreatePool(rctx, name, spec)
		switch {
		case err == nil:
			a.o.log.Info("pool created", "pool", name, "capacity", spec.Capacity)
			return nil
		case errors.Is(err, coordinator.ErrPoolExists):
			return nil
		case errors.Is(err, coordinator.ErrInvalid):
			return retry.Permanent(fmt.Errorf("agent: pool %q: %w", name, err))
		case etcdclient.IsPermanent(err):
			return retry.Permanent(fmt.Errorf("agent: create pool %q: %w", name,
				etcdclient.Op("write", coordinator.SegPrefix(a.co.Prefix(), name, coordinator.SegSpec), err)))
		}
		return err
	}, func(err error, _ time.Duration) {
		a.o.log.Warn("cannot create pool; retrying", "pool", name, "err", err)
	})
	if ctx.Err() != nil {
		return nil // stopping: not a failure of the pool
	}
	return err
}
