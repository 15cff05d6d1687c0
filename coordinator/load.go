package coordinator

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// InstanceLoad is one instance as InstanceLoads reads it.
type InstanceLoad struct {
	// Lease is the lease the instance's key is under; 0 when the instance
	// is not registered.
	Lease clientv3.LeaseID
	// Bound is how many seats are bound to the instance: the keys of its
	// instance slots. A seat bound to it takes one, and the seat's release,
	// or its holder's lease's end, deletes it with the seat.
	Bound int
}

// loadsPerTxn is how many instances one InstanceLoads txn reads: two
// operations each, and the pool's spec, within etcd's default
// --max-txn-ops. An etcd with a lower limit refuses such a txn as too many
// operations: the batch is then halved until etcd takes it, and kept so
// for the Coordinator's later calls (loadBatch).
const loadsPerTxn = 32

// InstanceLoads reads, for each of the instances ids of pool, the lease
// it is registered under and how many seats are bound to it (an instance
// not registered has Lease 0, and Bound counts any seat still bound to it).
// It reads each instance's key and counts its slot keys (a count-only
// range), so its cost grows with len(ids), not with the pool's seats,
// waiters or instances: an agent that waits for its instances to go idle
// polls it. Up to loadsPerTxn instances are read in one txn, at one
// revision. ErrPoolNotFound when the pool does not exist.
func (c *Coordinator) InstanceLoads(ctx context.Context, pool string, ids ...string) (map[string]InstanceLoad, error) {
	if err := ValidateName(pool); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	for _, id := range ids {
		if err := ValidateName(id); err != nil {
			return nil, fmt.Errorf("instance id: %w", err)
		}
	}
	out := make(map[string]InstanceLoad, len(ids))
	for {
		batch := ids[:min(len(ids), c.loadsPerTxn())]
		resp, err := c.readLoads(ctx, pool, batch)
		if errors.Is(err, rpctypes.ErrTooManyOps) && len(batch) > 1 {
			lowerTo(&c.loadBatch, int64(len(batch)/2)) // and the same ids again, fewer at a time
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("coordinator: read the load of pool %q's instances: %w", pool, err)
		}
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return nil, fmt.Errorf("%w: %q", ErrPoolNotFound, pool)
		}
		for i, id := range batch {
			var l InstanceLoad
			if kvs := resp.Responses[1+2*i].GetResponseRange().Kvs; len(kvs) > 0 {
				l.Lease = clientv3.LeaseID(kvs[0].Lease)
			}
			l.Bound = int(resp.Responses[2+2*i].GetResponseRange().Count)
			out[id] = l
		}
		if ids = ids[len(batch):]; len(ids) == 0 {
			return out, nil // with no ids, after one txn that found the pool
		}
	}
}

// loadsPerTxn is how many instances an InstanceLoads txn reads now.
func (c *Coordinator) loadsPerTxn() int {
	if n := c.loadBatch.Load(); n > 0 {
		return int(n)
	}
	return loadsPerTxn
}

// readLoads reads the spec of pool and, for each of ids, its instance key
// and the count of its slot keys, in one txn.
func (c *Coordinator) readLoads(ctx context.Context, pool string, ids []string) (*clientv3.TxnResponse, error) {
	ops := []clientv3.Op{clientv3.OpGet(c.k.spec(pool), clientv3.WithCountOnly())}
	for _, id := range ids {
		ops = append(ops, clientv3.OpGet(c.k.instance(pool, id)),
			clientv3.OpGet(c.k.binds(pool, id), clientv3.WithPrefix(), clientv3.WithCountOnly()))
	}
	return c.cli.Txn(ctx).Then(ops...).Commit()
}
