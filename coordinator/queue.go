package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The queue. A waiter puts a key under queue/, bound to its lease; keys are
// ordered by create revision, which is arrival order. Only the first waiter
// (the head) watches the pool and sends claim txns; every other waiter
// watches just the key of the waiter in front of it, so a grant or a
// cancellation wakes exactly one waiter. The head's claim txn deletes its
// queue key in the same transaction and compares that its key still exists
// and that no key ahead of it does, so a waiter whose session died is never
// granted (etcd#19597), and a fresh claim, which compares an empty queue,
// never overtakes a waiter.
//
// Fairness is FIFO among waiters that can be served. A waiter whose own
// tenant limit or instance selector stops it while others could be served
// does not block the line: before queueing it waits, off the queue, until
// its own constraints would admit it; and if it reaches the head and its
// constraints bar it again, it steps out and repeats, rejoining at the back.
// Pre-waiters watch the whole pool prefix, so each change wakes every one of
// them (locally; they send no claim txn until their constraints fit).

// waitable reports whether a refusal may resolve by waiting.
func waitable(err error) bool {
	return errors.Is(err, ErrNoSeat) || errors.Is(err, ErrInstanceNotFound)
}

// wait queues the claimant and blocks until granted or ctx ends. On any
// failure it removes its queue key before returning.
func (c *Coordinator) wait(ctx context.Context, s *Session, pool string, req claimRequest) (*Claim, error) {
	for {
		if req.opts.constrained() {
			if err := c.preWait(ctx, s, pool, req.opts); err != nil {
				return nil, err
			}
		}
		qkey := c.k.queueKey(pool, req.lease, req.nonce)
		qrev, err := c.enqueue(ctx, s, pool, req, qkey)
		if err != nil {
			return nil, err
		}
		req.queueKey, req.queueRev = qkey, qrev
		cl, err := c.waitTurn(ctx, s, pool, req)
		if err == nil {
			return cl, nil
		}
		c.dequeue(s, pool, req)
		if !errors.Is(err, errStepOut) {
			return nil, err
		}
		req.nonce++ // a fresh queue key, at the back
	}
}

// errStepOut tells a head waiter barred by its own constraints to leave the
// line so that the waiters behind it can be served.
var errStepOut = errors.New("coordinator: step out of line")

// preWait blocks, holding no key, until the claimant's own constraints
// (tenant limit, instance selector) would admit it.
func (c *Coordinator) preWait(ctx context.Context, s *Session, pool string, o claimOptions) error {
	return c.watchPool(ctx, s, pool, func(st *poolState) (bool, error) { return st.ownFits(o), nil })
}

// watchPool keeps an exact snapshot of the pool (a read, then every watch
// event after it; a re-read after compaction) and calls f after each change
// until f is done or fails, ctx ends or the session ends.
func (c *Coordinator) watchPool(ctx context.Context, s *Session, pool string, f func(*poolState) (bool, error)) error {
	st := newPoolState(c.k, pool)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var wch clientv3.WatchChan
	for {
		if wch == nil {
			var resp *clientv3.GetResponse
			if err := retry(ctx, s, func() (err error) { resp, err = c.getPool(ctx, pool); return err }); err != nil {
				return err
			}
			st.load(resp.Header.Revision, resp.Kvs)
			wch = c.cli.Watch(wctx, c.k.pool(pool), clientv3.WithPrefix(), clientv3.WithRev(st.rev+1))
		}
		if done, err := f(st); done || err != nil {
			return err
		}
		wr, ok, err := nextWatch(ctx, s, wch)
		if err != nil {
			return err
		}
		if !ok || wr.Err() != nil {
			wch = nil // compacted or broken: re-list, never resume at the compact revision
			continue
		}
		st.apply(wr.Events)
	}
}

// enqueue puts the queue key, fenced like a claim so that an ambiguous put
// can be cancelled (see resolve). It returns the key's create revision.
func (c *Coordinator) enqueue(ctx context.Context, s *Session, pool string, req claimRequest, qkey string) (int64, error) {
	o := req.opts
	val, _ := json.Marshal(waiterRecord{Holder: o.holder, Tenant: o.tenant, Instance: o.instance, Labels: o.labels, Since: time.Now().UTC()})
	sh := c.shared(pool)
	fence := c.k.fence(pool, req.lease)
	for {
		sh.mu.Lock()
		frev := sh.st.fences[req.lease]
		sh.mu.Unlock()
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(fence), "=", frev)).
			Then(clientv3.OpPut(qkey, string(val), clientv3.WithLease(req.lease))).
			Else(clientv3.OpGet(c.k.pool(pool), clientv3.WithPrefix())).Commit()
		if err == nil && resp.Succeeded {
			return resp.Header.Revision, nil
		}
		if err != nil {
			_, resp, err = c.resolve(ctx, s, pool, req, err)
			if err != nil {
				return 0, err
			}
			for _, kv := range rangeKvs(resp) {
				if string(kv.Key) == qkey {
					return kv.CreateRevision, nil
				}
			}
		}
		sh.mu.Lock()
		sh.st.load(resp.Header.Revision, rangeKvs(resp))
		sh.mu.Unlock()
	}
}

// dequeue removes a waiter that gave up. If etcd cannot be reached now, the
// removal continues in the background until the session ends.
func (c *Coordinator) dequeue(s *Session, pool string, req claimRequest) {
	if !s.live() {
		return // the key goes with the lease; nothing can grant it now
	}
	cctx, cancelCleanup := c.cleanupCtx()
	defer cancelCleanup()
	ctx, cancel := s.bind(cctx) // a claimant never outlives its session
	defer cancel()
	if err := c.dropWaiter(ctx, s, pool, req); err != nil {
		c.log.Warn("remove queue key", "pool", pool, "key", req.queueKey, "err", err)
		c.goBackground(func(bctx context.Context) { c.reap(bctx, s, pool, req) })
	}
}

// waitTurn waits until the head grants this waiter a seat, or the waiters
// ahead have left and it serves as head itself.
func (c *Coordinator) waitTurn(ctx context.Context, s *Session, pool string, req claimRequest) (*Claim, error) {
	gkey := c.k.grant(pool, queueName(req.lease, req.nonce))
	for {
		var resp *clientv3.TxnResponse
		err := retry(ctx, s, func() (err error) {
			resp, err = c.cli.Txn(ctx).Then(
				clientv3.OpGet(req.queueKey),
				clientv3.OpGet(c.k.queue(pool), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(req.queueRev-1),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1)),
				clientv3.OpGet(gkey),
			).Commit()
			return err
		})
		if err != nil {
			return nil, err
		}
		if g := resp.Responses[2].GetResponseRange().Kvs; len(g) > 0 {
			return c.fromGrant(s, pool, g[0])
		}
		if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			return nil, c.queueGone(ctx, s, pool)
		}
		if ahead := resp.Responses[1].GetResponseRange().Kvs; len(ahead) > 0 {
			g, err := c.waitAhead(ctx, s, string(ahead[0].Key), gkey, resp.Header.Revision)
			if err != nil {
				return nil, err
			}
			if g != nil {
				return c.fromGrant(s, pool, g)
			}
			continue
		}
		cl, err := c.serveHead(ctx, s, pool, req)
		if errors.Is(err, errNotHead) {
			continue
		}
		return cl, err
	}
}

// queueGone explains why a waiter's queue key vanished.
func (c *Coordinator) queueGone(ctx context.Context, s *Session, pool string) error {
	if s.Err() == nil {
		if _, err := c.GetPool(ctx, pool); errors.Is(err, ErrPoolNotFound) {
			return fmt.Errorf("%w: %q deleted while waiting", ErrPoolDeleted, pool)
		}
	}
	return fmt.Errorf("%w: queue entry of lease %x is gone", ErrSessionExpired, s.Lease())
}

// waitAhead blocks until the key of the waiter ahead is deleted after rev
// (nil, nil: the caller re-checks), this waiter's grant key appears (it is
// returned), a watch breaks (the caller re-checks), the session ends, or
// ctx ends. It wakes on nothing else, so a release wakes O(1) waiters.
func (c *Coordinator) waitAhead(ctx context.Context, s *Session, ahead, grant string, rev int64) (*mvccpb.KeyValue, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	aheadW := c.cli.Watch(wctx, ahead, clientv3.WithRev(rev+1))
	grantW := c.cli.Watch(wctx, grant, clientv3.WithRev(rev+1))
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.Done():
			return nil, s.lostErr()
		case wr, ok = <-aheadW:
		case wr, ok = <-grantW:
		}
		if !ok || wr.Err() != nil {
			return nil, nil
		}
		for _, ev := range wr.Events {
			switch {
			case string(ev.Kv.Key) == grant && ev.Type == clientv3.EventTypePut:
				return ev.Kv, nil
			case string(ev.Kv.Key) == ahead && ev.Type == clientv3.EventTypeDelete:
				return nil, nil
			}
		}
	}
}

// nextWatch waits for the next watch response, or for ctx or the session
// to end.
func nextWatch(ctx context.Context, s *Session, wch clientv3.WatchChan) (clientv3.WatchResponse, bool, error) {
	select {
	case <-ctx.Done():
		return clientv3.WatchResponse{}, false, ctx.Err()
	case <-s.Done():
		return clientv3.WatchResponse{}, false, s.lostErr()
	case wr, ok := <-wch:
		return wr, ok, nil
	}
}

// serveHead runs while the waiter is first in line. It sends a claim txn
// only when its exact snapshot of the pool shows a seat it may take.
func (c *Coordinator) serveHead(ctx context.Context, s *Session, pool string, req claimRequest) (*Claim, error) {
	var cl *Claim
	err := c.watchPool(ctx, s, pool, func(st *poolState) (bool, error) {
		var err error
		cl, err = c.tryHead(ctx, s, pool, req, st)
		return cl != nil, err
	})
	return cl, err
}

// tryHead plans on the head's snapshot and sends at most one claim txn. It
// returns (nil, nil) when the waiter should keep waiting.
func (c *Coordinator) tryHead(ctx context.Context, s *Session, pool string, req claimRequest, st *poolState) (*Claim, error) {
	for {
		if g, ok := st.grants[queueName(req.lease, req.nonce)]; ok {
			return c.fromGrant(s, pool, g) // granted by a head before us
		}
		p, err := st.planBatch(req)
		switch {
		case err == nil:
		case ownLimit(err):
			return nil, errStepOut
		case waitable(err):
			return nil, nil
		case errors.Is(err, ErrPoolNotFound):
			return nil, fmt.Errorf("%w: %q deleted while waiting", ErrPoolDeleted, pool)
		case errors.Is(err, ErrSessionExpired):
			return nil, c.queueGone(ctx, s, pool)
		default:
			return nil, err
		}
		cl, resp, err := c.commit(ctx, s, pool, req, p)
		if err != nil || cl != nil {
			return cl, err
		}
		absorb(st, p, resp)
	}
}
