package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RegisterInstance registers (or re-registers) an instance in pool, bound
// to lease, normally the agent's Session lease: when the agent dies the
// instance goes with it and claims bound to it lose their seats with
// ErrInstanceGone. Seats defaults to 1 and State to ready. Re-registering
// an instance replaces it; claims in flight against the old registration
// retry.
func (c *Coordinator) RegisterInstance(ctx context.Context, pool string, lease clientv3.LeaseID, in Instance) (Instance, error) {
	if err := ValidateName(pool); err != nil {
		return Instance{}, fmt.Errorf("pool: %w", err)
	}
	in.defaults()
	if err := in.validate(); err != nil {
		return Instance{}, err
	}
	val, _ := json.Marshal(in)
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(c.k.spec(pool)), ">", 0)).
		Then(clientv3.OpPut(c.k.instance(pool, in.ID), string(val), clientv3.WithLease(lease))).Commit()
	if err != nil {
		return Instance{}, fmt.Errorf("coordinator: register instance %q in %q: %w", in.ID, pool, err)
	}
	if !resp.Succeeded {
		return Instance{}, fmt.Errorf("%w: %q", ErrPoolNotFound, pool)
	}
	in.Lease, in.Revision = lease, resp.Header.Revision
	return in, nil
}

// SetInstanceState marks an instance ready or draining, keeping its lease.
// A draining instance takes no new claims; held seats stay.
func (c *Coordinator) SetInstanceState(ctx context.Context, pool, id string, state InstanceState) (Instance, error) {
	for {
		in, err := c.instance(ctx, pool, id)
		if err != nil {
			return Instance{}, err
		}
		in.State = state
		if err := in.validate(); err != nil {
			return Instance{}, err
		}
		val, _ := json.Marshal(in)
		key := c.k.instance(pool, id)
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", in.Revision)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithIgnoreLease())).Commit()
		if err != nil {
			return Instance{}, fmt.Errorf("coordinator: set instance %q state: %w", id, err)
		}
		if resp.Succeeded {
			in.Revision = resp.Header.Revision
			return in, nil
		}
	}
}

// DeregisterInstance deletes an instance. Claims bound to it lose their
// seats with ErrInstanceGone.
func (c *Coordinator) DeregisterInstance(ctx context.Context, pool, id string) error {
	if err := ValidateName(id); err != nil {
		return fmt.Errorf("instance: %w", err)
	}
	if err := ValidateName(pool); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	resp, err := c.cli.Delete(ctx, c.k.instance(pool, id))
	if err != nil {
		return fmt.Errorf("coordinator: deregister %q: %w", id, err)
	}
	if resp.Deleted == 0 {
		if _, err := c.GetPool(ctx, pool); errors.Is(err, ErrPoolNotFound) {
			return err
		}
		return fmt.Errorf("%w: %q in pool %q", ErrInstanceNotFound, id, pool)
	}
	return nil
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
	var in Instance
	if err := json.Unmarshal(resp.Kvs[0].Value, &in); err != nil {
		return Instance{}, fmt.Errorf("%w: instance %q: %v", ErrInvalid, id, err)
	}
	in.defaults()
	in.Lease, in.Revision = clientv3.LeaseID(resp.Kvs[0].Lease), resp.Kvs[0].ModRevision
	return in, nil
}
