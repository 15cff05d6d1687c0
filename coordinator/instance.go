package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/etcdpool/etcdpool/internal/retry"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// InstanceOwnedError reports that an instance key is bound to a lease
// other than the caller's: another agent (or an earlier run of the same
// one) registered it, and nothing was written. From TakeOverInstance it
// may also say that the key changed since the refusal the takeover was
// given was read (the same Owner, a later Revision). It matches
// ErrConflict.
type InstanceOwnedError struct {
	// Pool and ID name the instance.
	Pool, ID string
	// Owner is the lease the key is bound to.
	Owner clientv3.LeaseID
	// Agent is the agent named in the registration; informational.
	Agent string
	// Stopping is the registration's AgentStopping: its agent drains it
	// to stop.
	Stopping bool
	// Drained says an operator drained the instance (draining, not by
	// its agent stopping: poolctl drain): TakeOverInstance keeps it so.
	Drained bool
	// Revision is the key's mod revision as read, 0 when not known.
	// TakeOverInstance takes the key over only while it is unchanged.
	Revision int64
	// Epoch and Started are the registration's: when its agent started.
	Epoch   int64
	Started time.Time
}

// Error implements error.
func (e *InstanceOwnedError) Error() string {
	return fmt.Sprintf("%v: instance %q of pool %q is registered by agent %q under lease %x",
		ErrConflict, e.ID, e.Pool, e.Agent, int64(e.Owner))
}

// Unwrap returns ErrConflict.
func (e *InstanceOwnedError) Unwrap() error { return ErrConflict }

// RegisterInstance registers (or re-registers) an instance in pool, bound
// to lease, normally the agent's Session lease: when the agent dies the
// instance goes with it and claims bound to it lose their seats with
// ErrInstanceGone. Seats defaults to 1 and State to ready. Re-registering
// an instance under the same lease replaces it; claims in flight against
// the old registration retry.
//
// RegisterInstance writes only a key that is absent or already bound to
// lease, in one transaction that compares the key's lease. While another
// lease holds the key it writes nothing and returns an
// *InstanceOwnedError; see TakeOverInstance. An address that another
// instance of the pool is registered at is refused with ErrConflict
// (addrFree).
func (c *Coordinator) RegisterInstance(ctx context.Context, pool string, lease clientv3.LeaseID, in Instance) (Instance, error) {
	put, err := c.instancePut(pool, lease, &in)
	if err != nil {
		return Instance{}, err
	}
	if err := c.addrFree(ctx, pool, in); err != nil {
		return Instance{}, err
	}
	key, spec := c.k.instance(pool, in.ID), c.specExists(pool)
	resp, err := c.cli.Txn(ctx).If(spec, leaseIs(key, lease)).Then(put).
		Else(clientv3.OpTxn([]clientv3.Cmp{spec, clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
			[]clientv3.Op{put}, []clientv3.Op{clientv3.OpGet(c.k.spec(pool)), clientv3.OpGet(key)})).Commit()
	if err != nil {
		return Instance{}, fmt.Errorf("coordinator: register instance %q in %q: %w", in.ID, pool, err)
	}
	if !resp.Succeeded {
		inner := resp.Responses[0].GetResponseTxn()
		if !inner.Succeeded {
			return Instance{}, c.instanceRefusal(pool, in.ID, inner.Responses)
		}
	}
	in.Lease, in.Revision = lease, resp.Header.Revision
	return in, nil
}

// TakeOverInstance re-binds an instance to lease from the holder that
// from describes: the refusal RegisterInstance returned (an
// *InstanceOwnedError), naming the lease that holds the key and the
// key's revision as read. It writes in as RegisterInstance does. The key
// is overwritten in one transaction that compares its lease with
// from.Owner and, when from.Revision is set, its mod revision with it,
// never deleted, so claims bound to the instance keep their seats; the
// agent of from.Owner can no longer change or delete it through the
// *IfOwner calls. So a takeover decided on what the key said (its agent
// stopping, say) never overwrites a write made since, such as an
// operator's drain. An operator's drain that from read (from.Drained,
// with from.Revision set) is kept: in is written draining, so a restarted
// agent, or one that takes an instance over in a rollout, does not admit
// claims to an instance an operator drained (found by a review,
// 2026-12-05: they wrote it ready). It returns an *InstanceOwnedError when the key is
// bound to neither from.Owner nor lease, or changed since from was read
// (read again), and ErrInstanceNotFound when it is gone (register it).
func (c *Coordinator) TakeOverInstance(ctx context.Context, pool string, from *InstanceOwnedError, lease clientv3.LeaseID, in Instance) (Instance, error) {
	if from == nil {
		return Instance{}, fmt.Errorf("%w: take over instance %q: no holder to take it from", ErrInvalid, in.ID)
	}
	if from.Drained && from.Revision != 0 {
		in.State, in.Stopping = InstanceDraining, false
	}
	put, err := c.instancePut(pool, lease, &in)
	if err != nil {
		return Instance{}, err
	}
	if err := c.addrFree(ctx, pool, in); err != nil {
		return Instance{}, err
	}
	key := c.k.instance(pool, in.ID)
	cmps := []clientv3.Cmp{c.specExists(pool), clientv3.Compare(clientv3.CreateRevision(key), ">", 0), leaseIs(key, from.Owner)}
	if from.Revision != 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", from.Revision))
	}
	resp, err := c.cli.Txn(ctx).If(cmps...).Then(put).Else(clientv3.OpGet(c.k.spec(pool)), clientv3.OpGet(key)).Commit()
	if err != nil {
		return Instance{}, fmt.Errorf("coordinator: take over instance %q in %q: %w", in.ID, pool, err)
	}
	if !resp.Succeeded {
		if err := c.instanceRefusal(pool, in.ID, resp.Responses); !isOwnedBy(err, lease) {
			return Instance{}, err
		}
	}
	in.Lease, in.Revision = lease, resp.Header.Revision
	return in, nil
}

// addrFree refuses in's address when another instance of pool is
// registered at it (ErrConflict, naming that instance): two IDs at one
// address would let two exclusive claims reach one worker. It reads the
// pool's instances before the caller's txn, not in it, so two
// registrations that race may both pass: it catches a misconfiguration,
// it is not a lock. An instance without an address is not checked.
func (c *Coordinator) addrFree(ctx context.Context, pool string, in Instance) error {
	if in.Addr == "" {
		return nil
	}
	resp, err := c.cli.Get(ctx, c.k.instances(pool), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("coordinator: register instance %q in %q: read its pool's instances: %w", in.ID, pool, err)
	}
	for _, kv := range resp.Kvs {
		var x Instance
		if json.Unmarshal(kv.Value, &x) == nil && x.ID != in.ID && x.Addr == in.Addr {
			return fmt.Errorf("%w: instance %q of pool %q is registered at %s already; one worker under two IDs would serve two claims at once",
				ErrConflict, x.ID, pool, in.Addr)
		}
	}
	return nil
}

// instancePut validates in and returns the put that registers it under
// lease.
func (c *Coordinator) instancePut(pool string, lease clientv3.LeaseID, in *Instance) (clientv3.Op, error) {
	if err := ValidateName(pool); err != nil {
		return clientv3.Op{}, fmt.Errorf("pool: %w", err)
	}
	in.defaults()
	if err := in.validate(); err != nil {
		return clientv3.Op{}, err
	}
	if err := cmp.Or(ValidateInstanceAddr(in.Addr), ValidateAgentName(in.Agent)); err != nil {
		return clientv3.Op{}, fmt.Errorf("instance %q: %w", in.ID, err)
	}
	val, _ := json.Marshal(in)
	return clientv3.OpPut(c.k.instance(pool, in.ID), string(val), clientv3.WithLease(lease)), nil
}

// instanceRefusal explains a failed instance write from the responses of
// Get(spec) and Get(instance key): ErrPoolNotFound, ErrInstanceNotFound
// or an *InstanceOwnedError.
func (c *Coordinator) instanceRefusal(pool, id string, rs []*pb.ResponseOp) error {
	if len(rs[0].GetResponseRange().Kvs) == 0 {
		return fmt.Errorf("%w: %q", ErrPoolNotFound, pool)
	}
	kvs := rs[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return fmt.Errorf("%w: %q in pool %q", ErrInstanceNotFound, id, pool)
	}
	in, _ := readInstance(id, kvs[0]) // whatever it holds, its lease holds it
	return in.Refusal(pool)
}

// Refusal is what a write to in's key by another lease is refused with:
// in, as read (Lease and Revision set), described as its holder. It is
// the refusal TakeOverInstance takes, for a caller that read the key
// itself (an agent's owner check).
func (in Instance) Refusal(pool string) *InstanceOwnedError {
	return &InstanceOwnedError{Pool: pool, ID: in.ID, Owner: in.Lease, Agent: in.Agent, Stopping: in.AgentStopping(),
		Drained: in.State == InstanceDraining && !in.Stopping, Revision: in.Revision, Epoch: in.Epoch, Started: in.Started}
}

func isOwnedBy(err error, lease clientv3.LeaseID) bool {
	var owned *InstanceOwnedError
	return errors.As(err, &owned) && owned.Owner == lease
}

func (c *Coordinator) specExists(pool string) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(c.k.spec(pool)), ">", 0)
}

// leaseIs holds when key is bound to lease. A missing key has lease 0.
func leaseIs(key string, lease clientv3.LeaseID) clientv3.Cmp {
	return clientv3.Compare(clientv3.LeaseValue(key), "=", lease)
}

// SetInstanceState marks an instance ready or draining, keeping its lease.
// A draining instance takes no new claims; held seats stay. It is for
// operators; an agent changes its own instances with
// SetInstanceStateIfOwner.
func (c *Coordinator) SetInstanceState(ctx context.Context, pool, id string, state InstanceState) (Instance, error) {
	var in Instance
	err := retry.Do(ctx, casRetry, func() (err error) {
		in, err = c.setInstanceState(ctx, pool, id, state, nil)
		if err != nil && !errors.Is(err, ErrConflict) {
			return retry.Permanent(err)
		}
		return err
	}, func(err error, wait time.Duration) { c.retried(pool, RetryInstance, wait, err) })
	return in, err
}

// SetInstanceStateIfOwner is SetInstanceState for the agent that holds the
// instance under lease: the transaction compares the key's lease and mod
// revision, so an instance taken over by another agent is never changed.
// Taking a ready instance to draining marks it Stopping: its agent stops.
// It makes one attempt and returns an *InstanceOwnedError when another
// lease holds the key, or ErrConflict when the key changed between the
// read and the write (read again and retry).
func (c *Coordinator) SetInstanceStateIfOwner(ctx context.Context, pool, id string, lease clientv3.LeaseID, state InstanceState) (Instance, error) {
	return c.setInstanceState(ctx, pool, id, state, &lease)
}

// setInstanceState reads the instance and writes it back with state,
// comparing its mod revision and, when owner is set, its lease.
func (c *Coordinator) setInstanceState(ctx context.Context, pool, id string, state InstanceState, owner *clientv3.LeaseID) (Instance, error) {
	in, err := c.instance(ctx, pool, id)
	if err != nil {
		return Instance{}, err
	}
	if owner != nil && in.Lease != *owner {
		return Instance{}, in.Refusal(pool)
	}
	switch {
	case owner == nil || state == InstanceReady:
		in.Stopping = false // an operator's write, or ready: not for taking back
	case in.State == InstanceReady:
		in.Stopping = true // its agent drains it to stop (Instance.Stopping)
	}
	in.State = state
	if err := in.validate(); err != nil {
		return Instance{}, err
	}
	val, _ := json.Marshal(in)
	key := c.k.instance(pool, id)
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", in.Revision), leaseIs(key, in.Lease)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return Instance{}, fmt.Errorf("coordinator: set instance %q state: %w", id, err)
	}
	if !resp.Succeeded {
		return Instance{}, fmt.Errorf("%w: instance %q of pool %q changed while its state was set", ErrConflict, id, pool)
	}
	in.Revision = resp.Header.Revision
	return in, nil
}

// DeregisterInstance deletes an instance. Claims bound to it end with
// ErrInstanceGone, and their seats are freed when their holders release
// them or after the hold (WithInstanceGoneHold). It is for operators; an
// agent deletes its own instances with DeregisterInstanceIfOwner.
func (c *Coordinator) DeregisterInstance(ctx context.Context, pool, id string) error {
	return c.deregister(ctx, pool, id, nil)
}

// DeregisterInstanceIfOwner is DeregisterInstance for the agent that holds
// the instance under lease: the delete compares the key's lease, so an
// instance taken over by another agent is never deleted. It returns an
// *InstanceOwnedError when another lease holds the key.
func (c *Coordinator) DeregisterInstanceIfOwner(ctx context.Context, pool, id string, lease clientv3.LeaseID) error {
	return c.deregister(ctx, pool, id, &lease)
}

func (c *Coordinator) deregister(ctx context.Context, pool, id string, owner *clientv3.LeaseID) error {
	if err := ValidateName(id); err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	if err := ValidateName(pool); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	key := c.k.instance(pool, id)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)}
	if owner != nil {
		cmps = append(cmps, leaseIs(key, *owner))
	}
	resp, err := c.cli.Txn(ctx).If(cmps...).Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(c.k.spec(pool)), clientv3.OpGet(key)).Commit()
	if err != nil {
		return fmt.Errorf("coordinator: deregister %q: %w", id, err)
	}
	if !resp.Succeeded {
		return c.instanceRefusal(pool, id, resp.Responses)
	}
	return nil
}

// GetInstance reads one instance, with its lease and mod revision. It
// returns ErrInstanceNotFound or ErrPoolNotFound when it is not there, and
// ErrInvalid when its key holds no record of it (Cause ErrNotInstance) or
// one with a field that does not decode; the Instance then has its ID,
// Lease and Revision, and whatever else decoded. A record that decodes is
// returned as it is, whatever this version makes of it (a state a newer
// etcdpool wrote, say).
func (c *Coordinator) GetInstance(ctx context.Context, pool, id string) (Instance, error) {
	return c.instance(ctx, pool, id)
}

func (c *Coordinator) instance(ctx context.Context, pool, id string) (Instance, error) {
	if err := ValidateName(pool); err != nil {
		return Instance{}, fmt.Errorf("pool: %w", err)
	}
	if err := ValidateName(id); err != nil {
		return Instance{}, fmt.Errorf("instance: %w", err)
	}
	resp, err := c.cli.Get(ctx, c.k.instance(pool, id))
	if err != nil {
		return Instance{}, fmt.Errorf("coordinator: get instance %q: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		if _, err := c.GetPool(ctx, pool); errors.Is(err, ErrPoolNotFound) {
			return Instance{}, err
		}
		return Instance{}, fmt.Errorf("%w: %q in pool %q", ErrInstanceNotFound, id, pool)
	}
	return readInstance(id, resp.Kvs[0])
}

// readInstance decodes kv, the key of instance id, as read: Lease and
// Revision from the key, defaults filled in. It fails with ErrInvalid,
// with Cause ErrNotInstance when kv holds no instance record of that ID
// at all (not a JSON object naming it), and without when it does but a
// field does not decode (a newer etcdpool's record, say); the Instance is
// then what could be read of it, with its ID, Lease and Revision, to
// describe its holder by. What decodes is not judged further: a state
// this version does not know may be a newer etcdpool's, which GetInstance
// passes on and an agent leaves alone; claims bind only to instances that
// validate (poolState.put).
func readInstance(id string, kv *mvccpb.KeyValue) (Instance, error) {
	in, err := decodeInstance(id, kv.Value)
	if ie, ok := errors.AsType[*InvalidError](err); ok {
		ie.Key = string(kv.Key)
	}
	in.Lease, in.Revision = clientv3.LeaseID(kv.Lease), kv.ModRevision
	return in, err
}

// decodeInstance is readInstance of a value alone. A value that does not
// decode whole is decoded again for its ID alone, to tell a record of the
// instance with a field this version does not read from no record of it.
func decodeInstance(id string, b []byte) (Instance, error) {
	var in Instance
	err := json.Unmarshal(b, &in)
	named := in.ID
	if err != nil {
		var head struct {
			ID string `json:"id"`
		}
		if herr := json.Unmarshal(b, &head); herr != nil {
			return Instance{ID: id}, &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("not an instance record: %v", herr), Cause: ErrNotInstance}
		}
		named = head.ID
		err = &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("a field of the record does not decode: %v", err)}
	}
	if named != id {
		return Instance{ID: id}, &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("the record names instance %.64q, not the key's", named), Cause: ErrNotInstance}
	}
	in.defaults()
	in.ID = id
	return in, err
}
