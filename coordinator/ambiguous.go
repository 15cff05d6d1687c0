package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The ambiguous outcome. A claim or enqueue txn that fails with a timeout
// or a lost connection may have committed, or may still commit later (it
// can sit in a server's queue). The claimant cannot simply retry: it could
// end up holding two seats. Instead it bumps its fence key, which every
// claim txn of its lease compares, so the lost attempt can no longer
// commit; then it reads the pool and adopts the seat if the attempt did
// commit. If the caller has gone, reap does the same in the background and
// releases whatever it finds.

// resolve handles a claim txn whose outcome is unknown (a timeout, a lost
// connection): it may have committed, or may still commit later. It first
// bumps the claimant's fence key, which every claim txn of this lease
// compares, so the lost attempt can no longer commit; then it reads the
// pool and adopts the seat if the attempt did commit. If ctx is already done
// the same work continues in the background and releases whatever it finds.
func (c *Coordinator) resolve(ctx context.Context, s *Session, pool string, req claimRequest, cause error) (*Claim, *clientv3.TxnResponse, error) {
	if etcdclient.IsPermanent(cause) {
		// Refused, not lost: permission denied, bad request. Nothing was
		// applied and retrying cannot help.
		return nil, nil, fmt.Errorf("coordinator: claim on pool %q (%s): %w", pool, c.k.pool(pool), cause)
	}
	c.log.Warn("ambiguous claim txn", "pool", pool, "lease", fmt.Sprintf("%x", req.lease), "err", cause)
	var resp *clientv3.TxnResponse
	err := c.withRetry(ctx, s, pool, RetryResolve, func() (err error) {
		resp, err = c.fenceAndRead(ctx, s, pool)
		if errors.Is(err, ErrSessionExpired) {
			return nil // nothing of this lease can commit any more
		}
		return err
	})
	if err == nil && resp == nil {
		err = s.lostErr()
	}
	if err != nil {
		req.spoil() // the lost attempt may still hold keys of its name
	}
	switch {
	case errors.Is(err, ErrSessionExpired) && !s.Borrowed():
		return nil, nil, err // the lease is ending: what the attempt left goes with it
	case err != nil:
		// For a borrowed session, a passed local deadline says nothing of
		// the lease, which its owner may keep alive through another
		// process: reap until etcd says the lease is gone.
		c.goBackground(func(bctx context.Context) { c.reap(bctx, s, pool, req) })
		return nil, nil, fmt.Errorf("coordinator: claim on pool %q: %w (outcome unknown: %v)", pool, err, cause)
	}
	if cl := c.adopt(s, pool, req, rangeKvs(resp)); cl != nil {
		cl, err := c.keepIfLive(cl)
		return cl, resp, err
	}
	return nil, resp, nil
}

// findKey returns key's entry in kvs, or nil.
func findKey(kvs []*mvccpb.KeyValue, key string) *mvccpb.KeyValue {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv
		}
	}
	return nil
}

// fenceAndRead puts the fence key, then reads the pool in the same txn.
func (c *Coordinator) fenceAndRead(ctx context.Context, s *Session, pool string) (*clientv3.TxnResponse, error) {
	resp, err := c.cli.Txn(ctx).Then(
		clientv3.OpPut(c.k.fence(pool, s.Lease()), "", clientv3.WithLease(s.Lease())),
		clientv3.OpGet(c.k.pool(pool), clientv3.WithPrefix())).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil, s.lostErr()
	}
	if err != nil {
		return nil, err
	}
	resp.Succeeded = false // present it as a failed claim's read to absorb
	return resp, nil
}

// adopt finds the seat a lost attempt took, by the claim's name, in a read
// of the whole pool: the attempt's own claim, or a grant made to it after
// an enqueue that did land.
func (c *Coordinator) adopt(s *Session, pool string, req claimRequest, kvs []*mvccpb.KeyValue) *Claim {
	st := newPoolState(c.k, pool)
	st.load(1, kvs)
	g := st.grantOf(queueName(req.lease, req.nonce)) // by the name, which carries the nonce
	if g == nil || g.err != nil {
		return nil
	}
	return c.newClaim(s, pool, g.seat, g.kv.CreateRevision, g.rec, g.inst)
}

// reap runs after an ambiguous attempt whose caller has gone: it retries
// fence-and-read until it succeeds, then releases any seat or queue entry
// the attempt left (cleanUp: until the session ends; for a borrowed
// session, until etcd says the lease is gone, which the fence's put
// tells).
func (c *Coordinator) reap(ctx context.Context, s *Session, pool string, req claimRequest) {
	c.cleanUp(ctx, s, pool, RetryReap, "a seat or queue key of an ambiguous claim", func(ctx context.Context) error {
		resp, err := c.fenceAndRead(ctx, s, pool)
		if errors.Is(err, ErrSessionExpired) {
			return nil // the lease is gone, and all of it
		}
		if err != nil {
			return err
		}
		if cl := c.adopt(s, pool, req, rangeKvs(resp)); cl != nil {
			if err = cl.Release(ctx); errors.Is(err, ErrNotHeld) {
				err = nil
			} else if err != nil {
				cl.lose(ErrClosed, "not taken") // unregisters it; the next try adopts again
				return err
			}
		}
		// A queue key absent from the read never comes: the fence put
		// with the read stops a late enqueue, and nothing else writes
		// it. (After an ambiguous enqueue, only the read tells its
		// revision.)
		if kv := findKey(rangeKvs(resp), c.k.queueKey(pool, req.lease, req.nonce)); kv != nil {
			req.queueKey, req.queueRev = string(kv.Key), kv.CreateRevision
			return c.dropWaiter(ctx, s, pool, req)
		}
		return nil
	})
}
