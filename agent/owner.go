package agent

import (
	"context"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// The rule this file keeps: an agent writes only instance keys bound to
// its own lease (every write is fenced by the lease in the transaction,
// see coordinator's *IfOwner calls). It takes a key from another lease
// only in one transaction that compares that lease and the key's revision
// as the agent read them (TakeOverInstance, a put: claims bound to the
// instance keep their seats; a write made since, an operator's drain say,
// makes it apply nothing), and only when the other lease is
//
//   - one of this process's earlier sessions (a lost lease that came back,
//     for example after etcd restarted), or
//   - a lease whose agent is stopping (coordinator.Instance.Stopping: it
//     drains the instance to stop), while this agent is not draining: an
//     undone rollout, the newer agent stopped first, whose holders keep
//     their seats instead of losing them at its drain timeout, or
//   - a lease of an agent that started before this one (a lower
//     coordinator.Instance.Epoch, startEpoch; for a registration without
//     one, olderHolder): of an earlier run of an agent with the same name
//     (a restart), or of any agent when takeover is on (WithTakeover: a
//     rollout that overlaps two agents).
//
// So of two agents with takeover on, the newer keeps the instance: the
// older never takes it from the newer, and the newer takes it back if the
// older registered it while the newer's lease was lost (a partition, a
// pause) and its key gone with it. Otherwise an instance another agent
// holds is left to that agent until its key is gone; the agent then
// registers it again.

// ref names one of the agent's instances.
type ref struct{ pool, id string }

func refOf(in config.Instance) ref { return ref{in.Pool, in.ID} }

func (r ref) String() string { return r.pool + "/" + r.id }

// ownership is what the agent knows of who holds its instances. Guarded
// by Agent.mu.
type ownership struct {
	leases   map[clientv3.LeaseID]bool               // the leases of this process's sessions
	held     map[ref]bool                            // registered by this process at least once
	foreign  map[ref]*coordinator.InstanceOwnedError // held by another agent now
	missing  map[ref]bool                            // found gone, not registered again yet
	stopping map[ref]clientv3.LeaseID                // held under a lease whose agent is stopping
	unsure   map[ref]clientv3.LeaseID                // a write under that lease failed, and may have applied
}

func newOwnership() ownership {
	return ownership{leases: map[clientv3.LeaseID]bool{}, held: map[ref]bool{},
		foreign: map[ref]*coordinator.InstanceOwnedError{}, missing: map[ref]bool{}, stopping: map[ref]clientv3.LeaseID{},
		unsure: map[ref]clientv3.LeaseID{}}
}

// addLease records the lease of a new session.
func (a *Agent) addLease(lease clientv3.LeaseID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.own.leases[lease] = true
}

// takeoverReason returns why the agent may take r over from the holder
// described by e, or "" when it must leave it alone.
func (a *Agent) takeoverReason(r ref, e *coordinator.InstanceOwnedError) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.own.leases[e.Owner]:
		return "held under an earlier lease of this agent"
	case a.stoppingOwner(r, e.Owner):
		return "its agent is stopping (it drains the instance)"
	case !a.olderHolder(r, e):
		return ""
	case e.Agent == a.name:
		return "held by an earlier run of this agent (same name)"
	case a.o.takeover:
		return "takeover is on"
	}
	return ""
}

// olderHolder reports whether e's agent started before this one, so that
// this one may take r over from it (takeoverReason): by its epoch, lower
// than ours, or, of one epoch, by its start time (no write to etcd came
// between the two starts; the hosts' clocks then judge). A registration
// without an epoch (0) was written by an etcdpool before 2026-12-05, or
// rewritten by one (an older poolctl's drain drops it): its agent may
// have started after this one (a rollback starts older versions last),
// so the rule before epochs holds for it: older, unless this process has
// held r, which that agent then took over. Called with a.mu held.
func (a *Agent) olderHolder(r ref, e *coordinator.InstanceOwnedError) bool {
	switch {
	case e.Epoch == 0:
		return !a.own.held[r]
	case a.epoch == 0:
		return false // ours not read yet: no registration was sent
	case e.Epoch != a.epoch:
		return e.Epoch < a.epoch
	}
	return !e.Started.IsZero() && e.Started.Before(a.started)
}

// startEpoch returns the agent's epoch, which its registrations carry
// (coordinator.Instance.Epoch): the etcd revision read as it first
// registers an instance, from the header of a read of that instance's
// pool spec (a key the agent's role may read), read once and kept
// whatever comes after (a pool created later, registrations refused, a
// lease lost), so that the agents' order is that of their starts.
func (a *Agent) startEpoch(ctx context.Context, in config.Instance) (int64, error) {
	a.mu.Lock()
	e := a.epoch
	a.mu.Unlock()
	if e > 0 {
		return e, nil
	}
	key := coordinator.SegPrefix(a.co.Prefix(), in.Pool, coordinator.SegSpec)
	resp, err := a.co.Client().Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return 0, etcdclient.Op("read", key, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.epoch == 0 {
		a.epoch = resp.Header.Revision
		a.o.log.Info("agent epoch", "epoch", a.epoch, "started", a.started)
	}
	return a.epoch, nil
}

// stoppingOwner reports whether lease, which holds r, is one the agent
// saw stopping (ownerStopping); never a key without a lease. Called with
// a.mu held. (hold, the only caller's caller, returns before drain starts,
// so this agent is not draining then.)
func (a *Agent) stoppingOwner(r ref, lease clientv3.LeaseID) bool {
	l, ok := a.own.stopping[r]
	return ok && lease != 0 && l == lease
}

// ownerStopping records whether the agent of lease, which holds r, is
// stopping (coordinator.Instance.Stopping).
func (a *Agent) ownerStopping(r ref, lease clientv3.LeaseID, stopping bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if stopping {
		a.own.stopping[r] = lease
	} else {
		delete(a.own.stopping, r)
	}
}

// owned records that the agent holds r.
func (a *Agent) owned(r ref) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.own.held[r] = true
	delete(a.own.foreign, r)
	delete(a.own.missing, r)
	delete(a.own.unsure, r)
}

// writeFailed records that a registration of r under lease failed in a
// way that may have applied (its answer lost).
func (a *Agent) writeFailed(r ref, lease clientv3.LeaseID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.own.unsure[r] = lease
}

// mayHaveWritten reports whether a registration of r under lease failed
// in a way that may have applied (writeFailed), since r was last held.
func (a *Agent) mayHaveWritten(r ref, lease clientv3.LeaseID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, ok := a.own.unsure[r]
	return ok && l == lease
}

// foreignOwner records that another agent holds r, and logs it when that
// holder is new.
func (a *Agent) foreignOwner(r ref, e *coordinator.InstanceOwnedError) {
	a.mu.Lock()
	prev, held := a.own.foreign[r], a.own.held[r]
	a.own.foreign[r] = e
	delete(a.own.missing, r)
	a.mu.Unlock()
	if prev != nil && prev.Owner == e.Owner {
		return
	}
	log := a.o.log.With("pool", r.pool, "instance", r.id, "owner", e.Agent, "owner_lease", leaseHex(e.Owner))
	if held {
		log.Warn("instance taken over by another agent; leaving it to that agent until it is gone")
		return
	}
	if a.o.takeover {
		log.Warn("instance held by an agent that found its pools after this one did (or with it); waiting until it is free")
		return
	}
	log.Warn("instance held by another agent's live lease; waiting until it is free (serve --takeover takes it over)")
}

// freed forgets the holder of r: its key is gone. Until the agent has
// registered it again, r is missing, and Status is not Registered.
func (a *Agent) freed(r ref) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.own.foreign, r)
	a.own.missing[r] = true
}

// foreignList describes the instances held by other agents, sorted.
func (a *Agent) foreignList() []string {
	var out []string
	for r, e := range a.own.foreign {
		out = append(out, fmt.Sprintf("%s held by agent %q under lease %s", r, e.Agent, leaseHex(e.Owner)))
	}
	sort.Strings(out)
	return out
}
