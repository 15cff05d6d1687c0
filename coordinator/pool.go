package coordinator

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CreatePool creates a pool. It fails with ErrPoolExists if the pool is
// there already, and with ErrInvalid for a bad name or spec.
func (c *Coordinator) CreatePool(ctx context.Context, name string, spec PoolSpec) (Pool, error) {
	val, err := c.encodeSpec(name, spec)
	if err != nil {
		return Pool{}, err
	}
	key := c.k.spec(name)
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).Commit()
	if err != nil {
		return Pool{}, fmt.Errorf("coordinator: create pool %q: %w", name, err)
	}
	if !resp.Succeeded {
		return Pool{}, fmt.Errorf("%w: %q", ErrPoolExists, name)
	}
	return Pool{Name: name, Spec: spec, Revision: resp.Header.Revision}, nil
}

// GetPool reads a pool's spec. A spec that does not decode or validate
// yields ErrBadSpec.
func (c *Coordinator) GetPool(ctx context.Context, name string) (Pool, error) {
	if err := ValidateName(name); err != nil {
		return Pool{}, fmt.Errorf("pool: %w", err)
	}
	resp, err := c.cli.Get(ctx, c.k.spec(name))
	if err != nil {
		return Pool{}, fmt.Errorf("coordinator: get pool %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return Pool{}, fmt.Errorf("%w: %q", ErrPoolNotFound, name)
	}
	spec, err := decodeSpec(name, resp.Kvs[0].Value)
	return Pool{Name: name, Spec: spec, Revision: resp.Kvs[0].ModRevision}, err
}

// UpdatePool replaces a pool's spec. With rev > 0 it succeeds only if the
// spec's mod revision is still rev (ErrConflict otherwise); with rev 0 it
// overwrites any spec, even a malformed one. A live capacity change is safe:
// claims in flight compare the spec revision and retry; holders above a
// reduced capacity keep their seats and no new seat is granted until fewer
// than the new capacity are held.
func (c *Coordinator) UpdatePool(ctx context.Context, name string, spec PoolSpec, rev int64) (Pool, error) {
	val, err := c.encodeSpec(name, spec)
	if err != nil {
		return Pool{}, err
	}
	key := c.k.spec(name)
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", rev)
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	}
	resp, err := c.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, val)).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return Pool{}, fmt.Errorf("coordinator: update pool %q: %w", name, err)
	}
	if !resp.Succeeded {
		if len(rangeKvs(resp)) == 0 {
			return Pool{}, fmt.Errorf("%w: %q", ErrPoolNotFound, name)
		}
		return Pool{}, fmt.Errorf("%w: pool %q spec is no longer at revision %d", ErrConflict, name, rev)
	}
	return Pool{Name: name, Spec: spec, Revision: resp.Header.Revision}, nil
}

// DeletePool deletes a pool and every key under it. Without force it fails
// with ErrPoolInUse while seats are held or claimants wait; with force,
// holders lose their seats with ErrPoolDeleted and waiters stop waiting.
func (c *Coordinator) DeletePool(ctx context.Context, name string, force bool) error {
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(c.k.spec(name)), ">", 0)}
	if !force {
		cmps = append(cmps,
			clientv3.Compare(clientv3.CreateRevision(c.k.seats(name)).WithPrefix(), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(c.k.queue(name)).WithPrefix(), "=", 0))
	}
	resp, err := c.cli.Txn(ctx).If(cmps...).
		Then(clientv3.OpDelete(c.k.pool(name), clientv3.WithPrefix())).
		Else(clientv3.OpGet(c.k.spec(name), clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return fmt.Errorf("coordinator: delete pool %q: %w", name, err)
	}
	if !resp.Succeeded {
		if len(rangeKvs(resp)) == 0 {
			return fmt.Errorf("%w: %q", ErrPoolNotFound, name)
		}
		return fmt.Errorf("%w: %q", ErrPoolInUse, name)
	}
	return nil
}

func (c *Coordinator) encodeSpec(name string, spec PoolSpec) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", fmt.Errorf("pool: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(spec)
	return string(b), err
}
