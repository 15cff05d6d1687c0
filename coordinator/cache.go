package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
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
	// fed is the pool's running feed (feed.go), or nil. Once synced it
	// keeps st whole and current, and claims then read the whole pool on
	// failure rather than a probe, which would replace st with a part.
	fed *poolFeed
	// handing is set while a release of this process hands its seat over
	// (handoff.go); the releases meanwhile only free their seats.
	handing bool
	// handoffDenied is when etcd last refused a hand-off on this pool for
	// good, and not the release alone (a role that may not write the
	// waiter's keys, say); zero if never (deniedHandoff).
	handoffDenied time.Time
	// aiming counts, per seat, this process's claim txns in flight that
	// chose it, so that concurrent claimants choose different free seats
	// (freeSlot) rather than collide on the one each saw free.
	aiming map[int]int
	// heldBack lists, per constraint class, this process's waiters held
	// back off the line, in arrival order, inLine counts those in line,
	// and unseen holds the tokens of those granted that st may not show
	// yet (heldback.go); arrivals numbers them.
	heldBack map[string][]*heldBackTurn
	inLine   map[string]int
	unseen   map[string][]int64
	arrivals uint64
	// ownRecords are the waiting keys of this process's turns; records
	// and lineClasses are the waiting records and the count in line of
	// each class that st showed at their revisions (heldback_peers.go).
	ownRecords     map[string]bool
	records        map[string][]recordAt
	recordsRev     int64
	lineClasses    map[string]int
	lineClassesRev int64
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

// forgetMissing drops the cached state of a pool that a claim found
// missing, unless something of this process still uses it: a feed, a
// claim txn in flight, a held-back or queued waiter, a hand-off. Else a
// Coordinator asked for many names of pools that do not exist (an HTTP API
// passes a path's name through), or that were deleted, kept a state for
// each, and for a deleted one all it last read. A claimant that took the
// state just before keeps its copy: the next claim starts a fresh one, and
// the two only ever disagree on hints (their plans' compares decide).
func (c *Coordinator) forgetMissing(pool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh, ok := c.states[pool]
	if !ok {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.fed != nil || sh.handing || len(sh.aiming) > 0 || len(sh.heldBack) > 0 || len(sh.inLine) > 0 {
		return
	}
	delete(c.states, pool)
}

// errNotLoaded says a shared state has never been read.
var errNotLoaded = errors.New("coordinator: pool state not loaded")

// exact reports whether a pool feed keeps the state whole and current.
func (sh *sharedState) exact() bool { return sh.fed != nil && sh.fed.synced }

// current is exact for a caller that does not hold sh.mu.
func (sh *sharedState) current() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.exact()
}

func (sh *sharedState) plan(req claimRequest) (*claimPlan, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.st.rev == 0 {
		return nil, errNotLoaded
	}
	req.busy = sh.aiming
	p, err := sh.st.plan(req)
	if err == nil {
		err = sh.heldBackAhead(req.opts)
	}
	if err == nil {
		p.probe = !sh.exact()
		if sh.aiming == nil {
			sh.aiming = map[int]int{}
		}
		sh.aiming[p.seat]++
		p.aimed = true
	}
	return p, err
}

// landed ends the count of p's seat in aiming once p's txn has returned.
func (sh *sharedState) landed(p *claimPlan) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !p.aimed {
		return
	}
	p.aimed = false
	if sh.aiming[p.seat]--; sh.aiming[p.seat] == 0 {
		delete(sh.aiming, p.seat)
	}
}

// refreshShared reads the pool into the shared state: a probe for req
// (probe.go), or the whole pool when whole is set or a feed keeps the state
// whole. A waiting claimant retries through transient errors.
func (c *Coordinator) refreshShared(ctx context.Context, s *Session, sh *sharedState, pool string, req claimRequest, whole bool) error {
	if !req.opts.wait {
		return c.refresh(ctx, sh, pool, req, whole)
	}
	return c.withRetry(ctx, s, pool, RetryClaimRead, func() error { return c.refresh(ctx, sh, pool, req, whole) })
}

// refresh is refreshShared's one try. The state it leaves is at least as
// new as a read made during the call, which a claim needs before it
// refuses (claim): a probe, or the whole pool when a feed keeps the state
// whole, or synced while the probe was out.
func (c *Coordinator) refresh(ctx context.Context, sh *sharedState, pool string, req claimRequest, whole bool) error {
	sh.mu.Lock()
	whole = whole || sh.exact()
	sh.mu.Unlock()
	if !whole {
		resp, err := c.cli.Txn(ctx).Then(c.k.probeOps(pool, req)...).Commit()
		if err != nil {
			return fmt.Errorf("coordinator: read pool %q: %w", pool, err)
		}
		if sh.takeProbe(resp.Header.Revision, resp.Responses, req.lease) {
			return nil
		}
	}
	resp, err := c.getPool(ctx, pool)
	if err != nil {
		return fmt.Errorf("coordinator: read pool %q: %w", pool, err)
	}
	sh.mu.Lock()
	sh.st.load(resp.Header.Revision, resp.Kvs) // ignored if the feed's state is newer
	sh.mu.Unlock()
	return nil
}

// takeProbe loads a probe read at rev by the claimant of lease into the
// shared state, and reports whether it did. It does not when a feed synced
// meanwhile: the feed's state is whole, and the probe would replace it with
// a part; but it may be older than the probe, so the caller reads the
// whole pool instead.
func (sh *sharedState) takeProbe(rev int64, resps []*pb.ResponseOp, lease clientv3.LeaseID) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.exact() {
		return false
	}
	sh.st.loadProbe(rev, resps, lease)
	return true
}

// absorb folds a claim txn's outcome into a state: the Else read on
// failure (a probe when p.probe, else the whole pool), the plan's own
// writes on success. Own writes are later than the snapshot and do not move
// st.rev, which keeps the slow path of takeSlot sound: they only make its
// compare fail, never pass wrongly.
func absorb(st *poolState, p *claimPlan, resp *clientv3.TxnResponse) {
	switch {
	case resp == nil:
	case !resp.Succeeded && p.probe:
		st.loadProbe(resp.Header.Revision, resp.Responses, p.lease)
	case !resp.Succeeded:
		st.load(resp.Header.Revision, rangeKvs(resp))
	default:
		st.committed(p, resp.Header.Revision)
	}
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

// absorb folds a claim txn's outcome into the shared state, and reports
// whether a failed txn's Else read went in. A probe never replaces the
// whole state a feed keeps: the feed brings what changed, but it may not
// have brought it yet, so the state is then no fresher than before.
func (sh *sharedState) absorb(p *claimPlan, resp *clientv3.TxnResponse) (read bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p.probe && sh.exact() && resp != nil && !resp.Succeeded {
		return false
	}
	absorb(sh.st, p, resp)
	return resp != nil && !resp.Succeeded
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
