package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The claim cache: each pool's last known state, shared by this process's
// claimants, so that an uncontended claim needs no read before its txn. It
// is only ever a hint: every fact a plan takes from it is re-checked by the
// plan's compares, so a stale cache costs a failed txn, never safety.

// sharedState is a pool's cached state shared by this process's claimants.
type sharedState struct {
	mu sync.Mutex
	st *poolState
	// handing is set while a release of this process hands its seat over
	// (handoff.go); the releases meanwhile only free their seats.
	handing bool
}

func (c *Coordinator) shared(pool string) *sharedState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sharedLocked(pool)
}

func (c *Coordinator) sharedLocked(pool string) *sharedState {
	s, ok := c.states[pool]
	if !ok {
		s = &sharedState{st: newPoolState(c.k, pool)}
		c.states[pool] = s
	}
	return s
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

// refreshShared reads the pool into the shared state; a waiting claimant
// retries through transient errors.
func (c *Coordinator) refreshShared(ctx context.Context, s *Session, sh *sharedState, pool string, wait bool) error {
	if !wait {
		return c.refresh(ctx, sh, pool)
	}
	return withRetry(ctx, s, func() error { return c.refresh(ctx, sh, pool) })
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
	st.committed(p, resp.Header.Revision)
}

// committed folds in the writes of plan p, committed at rev, unless the
// state is already at or past rev (then it holds them, or later changes).
func (st *poolState) committed(p *claimPlan, rev int64) {
	if rev <= st.rev {
		return
	}
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

// absorb folds a claim txn's outcome into the shared state.
func (sh *sharedState) absorb(p *claimPlan, resp *clientv3.TxnResponse) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	absorb(sh.st, p, resp)
}

// forgetIn drops a released claim's keys from st, so that the next claim
// of this process sees the seat free without a read. It drops a key only if
// its create revision is the claim's token: a later holder of the same slot
// has a higher one and must stay counted, or the slow path of takeSlot would
// undercount.
func forgetIn(st *poolState, cl *Claim) {
	k, rec := st.k, cl.rec
	if kv, ok := st.seats[cl.seat]; ok && kv.CreateRevision == cl.token {
		st.del(cl.key())
	}
	if rec.TenantSlot >= 0 && st.tenants[rec.Tenant][rec.TenantSlot] == cl.token {
		st.del(k.tenant(cl.pool, rec.Tenant, rec.TenantSlot, cl.claim))
	}
	if rec.BindSlot >= 0 && st.binds[rec.Instance][rec.BindSlot] == cl.token {
		st.del(k.bind(cl.pool, rec.Instance, rec.BindSlot, cl.claim))
	}
}
