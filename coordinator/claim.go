package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Claim is a held seat. Its token is the create revision of the seat key;
// every write made on the holder's behalf should be guarded by IsOwner.
type Claim struct {
	c     *Coordinator
	sess  *Session
	pool  string
	seat  int
	token int64
	rec   seatRecord
	inst  *Instance

	mu      sync.Mutex
	err     error         // why the seat was lost; nil while held
	donec   chan struct{} // closed when err is set
	monOnce sync.Once
	stopMon context.CancelFunc
}

// Claim takes one seat of pool for session s in one etcd transaction when
// the pool's cached state is current and a seat is free. With WithWait it
// queues behind earlier waiters and blocks until granted; otherwise it
// returns ErrNoSeat when no seat can be taken now. ctx bounds the whole
// call, queueing included; a cancelled wait leaves no key behind.
//
// Claim guarantees that the seat, tenant and instance limits held at the
// revision the seat was granted, and that a claim is never granted to a
// waiter whose queue key is gone. It does not guarantee the holder keeps the
// seat: watch Done.
func (c *Coordinator) Claim(ctx context.Context, s *Session, pool string, opts ...ClaimOption) (*Claim, error) {
	o := claimOptions{holder: defaultHolder()}
	for _, opt := range opts {
		opt(&o)
	}
	if err := ValidateName(pool); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("%w: nil session", ErrInvalid)
	}
	start := time.Now()
	cl, err := c.claim(ctx, s, pool, claimRequest{opts: o, lease: s.Lease(), nonce: rand.Uint64()})
	switch {
	case err == nil:
		c.metrics.ClaimResult(pool, ResultGranted)
		c.metrics.GrantWait(pool, time.Since(start))
		c.log.Debug("seat claimed", "pool", pool, "seat", cl.seat, "token", cl.token, "lease", fmt.Sprintf("%x", s.Lease()))
	case errors.Is(err, ErrNoSeat):
		c.metrics.ClaimResult(pool, ResultNoSeat)
	case ctx.Err() != nil:
		c.metrics.ClaimResult(pool, ResultCanceled)
	default:
		c.metrics.ClaimResult(pool, ResultError)
	}
	return cl, err
}

func defaultHolder() string {
	h, err := os.Hostname()
	if err != nil {
		h = "unknown"
	}
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}

// claim loops plan -> txn on the shared cached state. A decision to refuse
// is only taken on state read during this call.
func (c *Coordinator) claim(ctx context.Context, s *Session, pool string, req claimRequest) (*Claim, error) {
	sh := c.shared(pool)
	fresh := false
	for failed := 0; ; {
		if err := alive(ctx, s); err != nil {
			return nil, err
		}
		p, err := sh.plan(req)
		if err != nil && !fresh {
			if err := c.refreshShared(ctx, s, sh, pool, req.opts.wait); err != nil {
				return nil, err
			}
			fresh = true
			continue
		}
		if err != nil {
			if waitable(err) && req.opts.wait {
				return c.wait(ctx, s, pool, req)
			}
			return nil, err
		}
		cl, resp, err := c.commit(ctx, s, pool, req, p)
		if err != nil {
			return nil, err
		}
		sh.mu.Lock()
		absorb(sh.st, p, resp)
		sh.mu.Unlock()
		if cl != nil {
			return cl, nil
		}
		fresh = true // the failed txn's Else branch re-read the pool
		if failed++; failed > 2 {
			// Contention, or a compare the state cannot explain: back off
			// with jitter rather than spin.
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(rand.IntN(1<<min(failed, 8))) * time.Millisecond):
			}
		}
	}
}

// errNotLoaded says a shared state has never been read.
var errNotLoaded = errors.New("coordinator: pool state not loaded")

func (sh *sharedState) plan(req claimRequest) (*claimPlan, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.st.rev == 0 {
		return nil, errNotLoaded
	}
	return sh.st.plan(req)
}

// alive reports why a claimant can no longer go on, or nil.
func alive(ctx context.Context, s *Session) error {
	if s.Err() != nil {
		return expiredErr(s.Lease())
	}
	return ctx.Err()
}

// refreshShared reads the pool into the shared state; a waiting claimant
// retries through transient errors.
func (c *Coordinator) refreshShared(ctx context.Context, s *Session, sh *sharedState, pool string, wait bool) error {
	if !wait {
		return c.refresh(ctx, sh, pool)
	}
	return retry(ctx, s, func() error { return c.refresh(ctx, sh, pool) })
}

func (c *Coordinator) refresh(ctx context.Context, sh *sharedState, pool string) error {
	resp, err := c.getPool(ctx, pool)
	if err != nil {
		return fmt.Errorf("coordinator: read pool %q: %w", pool, err)
	}
	sh.mu.Lock()
	sh.st.load(resp.Header.Revision, resp.Kvs)
	sh.mu.Unlock()
	return nil
}

// commit sends one claim transaction. It returns the claim when the txn
// succeeded, or the response whose Else branch holds a fresh read of the
// pool. An ambiguous failure is resolved before it returns (see resolve).
func (c *Coordinator) commit(ctx context.Context, s *Session, pool string, req claimRequest, p *claimPlan) (*Claim, *clientv3.TxnResponse, error) {
	c.metrics.ClaimTxn(pool)
	resp, err := c.cli.Txn(ctx).If(p.cmps...).Then(p.ops...).
		Else(clientv3.OpGet(c.k.pool(pool), clientv3.WithPrefix())).Commit()
	switch {
	case err == nil && resp.Succeeded:
		return c.newClaim(s, pool, p.seat, resp.Header.Revision, p.rec, p.inst), resp, nil
	case err == nil:
		return nil, resp, nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return nil, nil, expiredErr(req.lease)
	}
	return c.resolve(ctx, s, pool, req, err)
}

// resolve handles a claim txn whose outcome is unknown (a timeout, a lost
// connection): it may have committed, or may still commit later. It first
// bumps the claimant's fence key, which every claim txn of this lease
// compares, so the lost attempt can no longer commit; then it reads the
// pool and adopts the seat if the attempt did commit. If ctx is already done
// the same work continues in the background and releases whatever it finds.
func (c *Coordinator) resolve(ctx context.Context, s *Session, pool string, req claimRequest, cause error) (*Claim, *clientv3.TxnResponse, error) {
	c.log.Warn("ambiguous claim txn", "pool", pool, "lease", fmt.Sprintf("%x", req.lease), "err", cause)
	var resp *clientv3.TxnResponse
	err := retry(ctx, s, func() (err error) {
		resp, err = c.fenceAndRead(ctx, s, pool)
		if errors.Is(err, ErrSessionExpired) {
			return nil // nothing of this lease can commit any more
		}
		return err
	})
	if err == nil && resp == nil {
		err = expiredErr(s.Lease())
	}
	switch {
	case errors.Is(err, ErrSessionExpired):
		return nil, nil, err
	case err != nil:
		c.goBackground(func(bctx context.Context) { c.reap(bctx, s, pool, req) })
		return nil, nil, fmt.Errorf("coordinator: claim on pool %q: %w (outcome unknown: %v)", pool, err, cause)
	}
	if cl := c.adopt(s, pool, req, rangeKvs(resp)); cl != nil {
		return cl, resp, nil
	}
	return nil, resp, nil
}

// fenceAndRead puts the fence key, then reads the pool in the same txn.
func (c *Coordinator) fenceAndRead(ctx context.Context, s *Session, pool string) (*clientv3.TxnResponse, error) {
	resp, err := c.cli.Txn(ctx).Then(
		clientv3.OpPut(c.k.fence(pool, s.Lease()), "", clientv3.WithLease(s.Lease())),
		clientv3.OpGet(c.k.pool(pool), clientv3.WithPrefix())).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil, expiredErr(s.Lease())
	}
	if err != nil {
		return nil, err
	}
	resp.Succeeded = false // present it as a failed claim's read to absorb
	return resp, nil
}

// adopt finds the seat a lost attempt took, by lease and nonce, in a read
// of the whole pool.
func (c *Coordinator) adopt(s *Session, pool string, req claimRequest, kvs []*mvccpb.KeyValue) *Claim {
	st := newPoolState(c.k, pool)
	st.load(1, kvs)
	for _, kv := range kvs {
		pk, err := c.k.parse(string(kv.Key))
		if err != nil || pk.Seg != segSeats || kv.Lease != int64(req.lease) {
			continue
		}
		var rec seatRecord
		if json.Unmarshal(kv.Value, &rec) == nil && rec.Nonce == req.nonce {
			var inst *Instance
			if in, ok := st.instances[rec.Instance]; ok {
				inst = &in
			} else if rec.Instance != "" {
				inst = &Instance{ID: rec.Instance} // deregistered since; the monitor will see it
			}
			return c.newClaim(s, pool, pk.Slot, kv.CreateRevision, rec, inst)
		}
	}
	return nil
}

// reap runs after an ambiguous attempt whose caller has gone: it retries
// fence-and-read until it succeeds, then releases any seat or queue entry
// the attempt left. It stops when the session or the Coordinator ends.
func (c *Coordinator) reap(ctx context.Context, s *Session, pool string, req claimRequest) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		rctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
		resp, err := c.fenceAndRead(rctx, s, pool)
		if err == nil {
			if cl := c.adopt(s, pool, req, rangeKvs(resp)); cl != nil {
				err = cl.Release(rctx)
			}
			if err == nil || errors.Is(err, ErrNotHeld) {
				_, err = c.cli.Delete(rctx, c.k.queueKey(pool, req.lease, req.nonce))
			}
		}
		cancel()
		if err == nil || errors.Is(err, ErrSessionExpired) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// absorb folds a claim txn's outcome into a state: the Else read on
// failure, the plan's own writes on success. Own writes are later than the
// snapshot and do not move st.rev, which keeps the slow path of takeSlot
// sound: they only make its compare fail, never pass wrongly.
func absorb(st *poolState, p *claimPlan, resp *clientv3.TxnResponse) {
	if resp == nil {
		return
	}
	if !resp.Succeeded {
		st.load(resp.Header.Revision, rangeKvs(resp))
		return
	}
	if resp.Header.Revision <= st.rev {
		return // a newer read already holds the outcome
	}
	rev := resp.Header.Revision
	for _, op := range p.ops {
		switch {
		case op.IsPut():
			st.put(&mvccpb.KeyValue{Key: op.KeyBytes(), Value: op.ValueBytes(),
				CreateRevision: rev, ModRevision: rev, Version: 1, Lease: int64(p.lease)})
		case op.IsDelete():
			st.del(string(op.KeyBytes()))
		}
	}
}

// rangeKvs returns the keys of the first range response in a txn response.
func rangeKvs(resp *clientv3.TxnResponse) []*mvccpb.KeyValue {
	for _, r := range resp.Responses {
		if rr := r.GetResponseRange(); rr != nil {
			return rr.Kvs
		}
	}
	return nil
}
