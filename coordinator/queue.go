package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The queue. A waiter puts a key under queue/, bound to its lease; keys are
// ordered by create revision, which is arrival order. Only the first waiter
// (the head) plans and sends claim txns, on the pool feed's exact view
// (feed.go); it grants free seats to the waiters behind it in the same txn
// (grant.go). Every other waiter sleeps until the feed applies a change to
// the key of the waiter in front of it or to its own queue key, which a
// grant deletes, so a grant or a cancellation wakes exactly one waiter. The head's claim txn deletes
// its queue key in the same transaction and compares that its key still
// exists and that no key ahead of it does, so a waiter whose session died
// is never granted (etcd#19597), and a fresh claim, which compares an empty
// queue, never overtakes a waiter.
//
// Fairness is FIFO among waiters that can be served. A waiter whose own
// tenant limit or instance selector stops it while others could be served
// does not block the line: before queueing it waits, off the queue, until
// its own constraints would admit it; and if it reaches the head and its
// constraints bar it again, it steps out and repeats, rejoining at the back.
// Pre-waiters look at the feed after each change, so each change wakes every
// one of them (locally; they send no claim txn until their constraints fit).
// Those of one process and constraint class rejoin in arrival order
// (heldback.go); those of different processes, in the order of their
// waiting records for a short grace (heldback_peers.go).
// A held-back waiter is not invisible: it keeps a waiting record that says
// why it waits (waiting.go), and every waiter reports its WaitStatus to
// its caller (WithWaitStatus) and to the metrics.

// waitable reports whether a refusal may resolve by waiting: not one that
// the spec makes permanent (see NoSeatError.Never).
func waitable(err error) bool {
	return (errors.Is(err, ErrNoSeat) || errors.Is(err, ErrInstanceNotFound)) && !never(err)
}

// wait queues the claimant and blocks until granted or ctx ends, telling
// w why it waits. On any failure it removes its queue key and its waiting
// record before returning.
func (c *Coordinator) wait(ctx context.Context, s *Session, pool string, req claimRequest) (*Claim, error) {
	// Keep the pool feed running while this claimant waits, so that when it
	// becomes head it plans at once, without reading the pool.
	fd, err := c.acquireFeed(pool)
	if err != nil {
		return nil, err
	}
	defer c.releaseFeed(pool, fd)
	w := c.newWaitTracker(s, pool, req)
	defer w.end()
	sh := c.shared(pool)
	var turn *heldBackTurn // its place among this process's waiters of its class
	if req.opts.constrained() {
		turn = sh.arrive(req.opts, w.key)
	}
	var token int64 // of the seat it is granted
	defer func() { sh.done(turn, token) }()
	for {
		if turn != nil {
			if err := c.preWait(ctx, s, pool, req.opts, w, turn); err != nil {
				return nil, err
			}
		}
		qkey := c.k.queueKey(pool, req.lease, req.nonce)
		qrev, granted, err := c.enqueue(ctx, s, pool, req, qkey, w.since, w.enqueueOps()...)
		if err != nil || granted != nil {
			if granted != nil {
				token = granted.token
			}
			return granted, err
		}
		sh.joined(turn)
		w.inLine()
		req.queueKey, req.queueRev = qkey, qrev
		cl, err := c.waitTurn(ctx, s, pool, req, fd, w, req.queueRev)
		// A head barred by its own constraints steps out into a waiting
		// record in one txn; if that fails it leaves as any waiter does.
		stepped := false
		for so := (*stepOutError)(nil); errors.As(err, &so) && !stepped; {
			var again bool
			if stepped, again = c.stepOut(ctx, req, so.proof, w); !again {
				break
			}
			// Its queue key went after the look that barred it (a release
			// or a head granted it a seat, most likely), or what barred it
			// no longer does. It looks again once the view shows a change
			// after the one it looked at, rather than leave and give the
			// seat away (TestGrantedAsHeadStepsOutKeepsSeat,
			// TestStepOutAfterBarLiftedStaysFirst). Not from the failed
			// txn's revision: a write elsewhere in etcd may have taken
			// that past the pool's last change, which the view then never
			// reaches while the pool is still (found by a review).
			cl, err = c.waitTurn(ctx, s, pool, req, fd, w, so.rev+1)
		}
		if err == nil {
			token = cl.token
			return cl, nil
		}
		if !stepped {
			c.dequeue(s, pool, req)
		}
		if !errors.Is(err, errStepOut) {
			return nil, err
		}
		sh.steppedOut(turn)
		// A fresh name, so a fresh queue key at the back. Its waiting record
		// keeps the first name, so neither is reused (names.go).
		req.spoil()
		req.nonce = rand.Uint64()
	}
}

// errStepOut tells a head waiter barred by its own constraints to leave the
// line so that the waiters behind it can be served. The head's refusal is
// a *stepOutError, which matches it.
var errStepOut = errors.New("coordinator: step out of line")

// stepOutError is errStepOut with proof: the compares that prove, on the
// server, that what barred the head still does, as the view it looked at
// (at revision rev) showed it (poolState.barProof). The step-out applies
// only with them, so a bar lifted before it applies (its tenant's seat
// released, an instance it selects registered) keeps the head first in
// line. Every compare it makes is of a key of the pool: when one fails,
// the pool changed after rev.
type stepOutError struct {
	proof []clientv3.Cmp
	rev   int64
}

func (e *stepOutError) Error() string        { return errStepOut.Error() }
func (e *stepOutError) Is(target error) bool { return target == errStepOut }

// preWait blocks, off the queue, until the claimant's own constraints
// (tenant limit, instance selector) would admit it and no earlier waiter
// of its class is to go first (turn, heldback.go; in other processes,
// heldback_peers.go); meanwhile its waiting record says why it waits. It fails at once when
// the spec denies the claimant's tenant (NoSeatError.Never).
func (c *Coordinator) preWait(ctx context.Context, s *Session, pool string, o claimOptions, w *waitTracker, turn *heldBackTurn) error {
	sh := c.shared(pool)
	return c.watchPool(ctx, s, pool, 0, func(live *poolState) func(context.Context) (bool, error) {
		if err := live.denied(o); err != nil {
			return func(context.Context) (bool, error) { return false, err }
		}
		fits := live.ownFits(o)
		join, lags, wait := sh.mayJoin(turn, live, o, fits) // under sh.mu, as live is
		if wait > 0 {
			// No change of the pool may come when the grace ends (a stale
			// record): look again then.
			time.AfterFunc(wait, func() {
				sh.mu.Lock()
				defer sh.mu.Unlock()
				sh.wake()
			})
		}
		switch {
		case join:
			return func(context.Context) (bool, error) { return true, nil }
		case lags:
			// The room is this process's own grants', which the view does
			// not show yet: its next change does, and decides. Meanwhile
			// neither the status nor the record changes (were it written
			// now, it would say the limits admit the claim, and be
			// written again at that change).
			return func(context.Context) (bool, error) { return false, nil }
		}
		if fits { // but earlier waiters of its class go first, or may
			return func(ctx context.Context) (bool, error) {
				w.waitTurn(ctx)
				return false, nil
			}
		}
		status := live.heldBackStatus(o)
		return func(ctx context.Context) (bool, error) {
			w.heldBack(ctx, status)
			return false, nil
		}
	})
}

// watchPool follows the pool's exact state (see feed.go): after each
// change, once the state is at least at revision minRev (what the caller
// has seen already), it calls look on the live state under its lock, and
// then, outside the lock, the act that look returned, until act is done or
// fails, ctx ends or the session ends. look must not block, and must not
// change the state: what act needs of it, look copies. So a change that
// asks nothing of the caller costs it O(1), not a copy of the pool.
func (c *Coordinator) watchPool(ctx context.Context, s *Session, pool string, minRev int64, look func(live *poolState) (act func(context.Context) (bool, error))) error {
	fd, err := c.acquireFeed(pool)
	if err != nil {
		return err
	}
	defer c.releaseFeed(pool, fd)
	for {
		var act func(context.Context) (bool, error)
		changed, err := fd.await(ctx, s, minRev, func(live *poolState) { act = look(live) })
		if err != nil {
			return err
		}
		if done, err := act(ctx); done || err != nil {
			return err
		}
		if err := waitOn(ctx, s, changed); err != nil {
			return err
		}
	}
}

// enqueue puts the queue key, fenced like a claim so that an ambiguous put
// can be cancelled (see resolve). It returns the key's create revision; or,
// when an ambiguous put did commit and a head granted it a seat before the
// resolution read the pool, that claim (the waiter must then not queue
// again: its key is gone with the grant).
//
// since is when the claimant began to wait, which the queue key records
// (a waiter that joins the line from being held back, or again after a
// step out, keeps it). extra are more ops of the same txn (the delete of a
// waiting record).
func (c *Coordinator) enqueue(ctx context.Context, s *Session, pool string, req claimRequest, qkey string, since time.Time, extra ...clientv3.Op) (int64, *Claim, error) {
	o := req.opts
	val := waiterRecord{Holder: o.holder, Tenant: o.tenant, Instance: o.instance, Labels: o.labels, Since: since}.encode()
	sh := c.shared(pool)
	fence, spec := c.k.fence(pool, req.lease), c.k.spec(pool)
	// No backoff: the compares are this claimant's own fence, which changes
	// only when it resolves an ambiguous attempt, and the pool's creation,
	// and a failure reloads both from the Else read; so the loop runs at
	// most once more per resolution, never in step with other claimants.
	//
	// The fence alone does not stop a put that lands late in a pool deleted
	// and created again: the deletion took the fence key with it, so its
	// mod revision reads 0 again. Compared, the spec's create revision (the
	// pool's incarnation) does.
	for {
		sh.mu.Lock()
		frev, born := sh.st.fences[req.lease], int64(0)
		if sh.st.specKV != nil {
			born = sh.st.specKV.CreateRevision
		}
		sh.mu.Unlock()
		if born == 0 {
			// The view shows no pool: gone, or a state not loaded yet (one
			// forgotten meanwhile, say). etcd tells.
			var resp *clientv3.GetResponse
			if err := c.withRetry(ctx, s, pool, RetryClaimRead, func() (err error) {
				resp, err = c.getPool(ctx, pool)
				return err
			}); err != nil {
				return 0, nil, fmt.Errorf("coordinator: read pool %q: %w", pool, err)
			}
			sh.mu.Lock()
			sh.st.load(resp.Header.Revision, resp.Kvs)
			gone := sh.st.specKV == nil
			sh.mu.Unlock()
			if gone {
				return 0, nil, fmt.Errorf("%w: %q deleted while waiting", ErrPoolDeleted, pool)
			}
			continue
		}
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(fence), "=", frev), clientv3.Compare(clientv3.CreateRevision(spec), "=", born)).
			Then(append([]clientv3.Op{clientv3.OpPut(qkey, string(val), clientv3.WithLease(req.lease))}, extra...)...).
			Else(clientv3.OpGet(c.k.pool(pool), clientv3.WithPrefix())).Commit()
		if err == nil && resp.Succeeded {
			return resp.Header.Revision, nil, nil
		}
		if err != nil {
			var granted *Claim
			granted, resp, err = c.resolve(ctx, s, pool, req, err)
			if err != nil || granted != nil {
				return 0, granted, err
			}
			if kv := findKey(rangeKvs(resp), qkey); kv != nil {
				return kv.CreateRevision, nil, nil
			}
		}
		sh.mu.Lock()
		sh.st.load(resp.Header.Revision, rangeKvs(resp))
		sh.mu.Unlock()
	}
}

// dequeue removes a waiter that gave up. If etcd cannot be reached now, the
// removal continues in the background until the session ends; for a
// borrowed session, until etcd says its lease is gone (reap), and in the
// background at once if the session has ended already.
func (c *Coordinator) dequeue(s *Session, pool string, req claimRequest) {
	switch {
	case !s.live() && !s.Borrowed():
		return // the key goes with the lease; nothing can grant it now
	case !s.live():
		// A borrowed session's lease may outlive the session here (see
		// reap), and its queue key with it: removed in the background, so
		// that the caller still returns as its session ends.
		req.spoil()
		c.goBackground(func(bctx context.Context) { c.reap(bctx, s, pool, req) })
		return
	}
	// Not c.cleanupCtx: a Close that ended the wait must not also stop the
	// removal of its queue key.
	cctx, cancelCleanup := context.WithTimeout(context.Background(), c.opts.timeout)
	defer cancelCleanup()
	ctx, cancel := s.bind(cctx) // a claimant never outlives its session
	defer cancel()
	if err := c.dropWaiter(ctx, s, pool, req); err != nil {
		req.spoil() // its queue key may be left
		c.log.Warn("remove queue key", "pool", pool, "key", req.queueKey, "err", err)
		c.goBackground(func(bctx context.Context) { c.reap(bctx, s, pool, req) })
	}
}

// waitTurn waits until the head or a release grants this waiter a seat, or
// the waiters ahead have left and it serves as head itself. It reads its
// place from the pool feed, and sleeps until the feed applies a change to
// the key of the waiter just ahead or to its own queue key, which the txn
// that grants it a seat deletes: a release wakes one waiter, and waiting
// costs no RPC. It first looks once the feed has caught up with revision
// seen: its enqueue's, or one the caller saw later.
func (c *Coordinator) waitTurn(ctx context.Context, s *Session, pool string, req claimRequest, fd *poolFeed, w *waitTracker, seen int64) (*Claim, error) {
	name := queueName(req.lease, req.nonce)
	for {
		var pl place
		var wake *feedSub
		_, err := fd.await(ctx, s, seen, func(st *poolState) {
			pl = place{own: st.queue[req.queueKey], ahead: st.ahead(req.queueRev), grant: st.grantOf(name), rev: st.rev}
			if pl.grant == nil && pl.own != nil && pl.ahead != nil {
				wake = fd.subscribe(string(pl.ahead.Key), req.queueKey)
				pl.status = st.queuedStatus(req, st.countAhead(req.queueRev))
			}
		})
		if err != nil {
			return nil, err
		}
		switch {
		case pl.grant != nil:
			return c.fromGrant(s, pool, req, pl.grant)
		case pl.own == nil:
			return nil, c.queueGone(ctx, s, pool)
		case pl.ahead != nil:
			w.set(pl.status) // outside the feed's lock: it calls the caller's hook
			if err := fd.sleep(ctx, s, wake); err != nil {
				return nil, err
			}
			seen = pl.rev + 1
			continue
		}
		cl, err := c.serveHead(ctx, s, pool, req, pl.rev, w)
		if errors.Is(err, errNotHead) {
			continue
		}
		return cl, err
	}
}

// place is where a waiter stands at revision rev: its own queue key and
// the key of the waiter just ahead, each nil if absent, and the seat
// granted to it, if any.
type place struct {
	own, ahead *mvccpb.KeyValue
	grant      *grant
	rev        int64
	status     WaitStatus // set while a waiter is ahead
}

// queueGone explains why a waiter's queue key vanished: the session ended,
// the pool was deleted, or, with both still there, someone removed the key
// (or force-released a seat granted to it before the waiter saw it).
func (c *Coordinator) queueGone(ctx context.Context, s *Session, pool string) error {
	if !s.live() {
		return s.lostErr()
	}
	if _, err := c.GetPool(ctx, pool); errors.Is(err, ErrPoolNotFound) {
		return fmt.Errorf("%w: %q deleted while waiting", ErrPoolDeleted, pool)
	}
	// The lease may be gone on the server before the session notices.
	if ttl, err := c.cli.TimeToLive(ctx, s.Lease()); err != nil || ttl.TTL <= 0 {
		return expiredErr(s.Lease())
	}
	return fmt.Errorf("%w: the queue entry of lease %x (or a seat granted to it) was removed by someone else while the session is live", ErrSeatLost, s.Lease())
}

// serveHead runs while the waiter is first in line. On each change of the
// pool it looks at the feed's live state; it copies the state, and sends a
// claim txn, only when that state shows a seat it may take. So a head in a
// full pool pays O(1) per change, whatever the pool's size.
func (c *Coordinator) serveHead(ctx context.Context, s *Session, pool string, req claimRequest, seen int64, w *waitTracker) (*Claim, error) {
	h := &headTurn{c: c, s: s, pool: pool, req: req, w: w}
	err := c.watchPool(ctx, s, pool, seen, h.look)
	return h.cl, err
}

// headTurn is a head waiter following the pool (serveHead).
type headTurn struct {
	c    *Coordinator
	s    *Session
	pool string
	req  claimRequest
	w    *waitTracker
	cl   *Claim // the seat, once it has one
}

// look decides, on the live state, what the head does about it (see
// watchPool).
func (h *headTurn) look(live *poolState) func(context.Context) (bool, error) {
	if g := live.grantOf(queueName(h.req.lease, h.req.nonce)); g != nil { // granted by a head before us
		return func(context.Context) (bool, error) {
			var err error
			h.cl, err = h.c.fromGrant(h.s, h.pool, h.req, g)
			return true, err
		}
	}
	p, err := live.plan(h.req)
	if err != nil {
		so := live.stepOut(h.req.opts, err) // on the view that barred it, under its lock
		return func(ctx context.Context) (bool, error) {
			return false, h.c.headRefused(ctx, h.s, h.pool, err, so, h.req.opts, h.w)
		}
	}
	snap := live.clone() // the grants behind the head mark what each takes: they need a copy
	return func(ctx context.Context) (bool, error) {
		var err error
		h.cl, err = h.c.tryHead(ctx, h.s, h.pool, h.req, snap, p, h.w)
		return h.cl != nil, err
	}
}

// tryHead sends the head's claim p, planned on the state st, with grants
// to the waiters behind it; when the txn fails, it plans again on the
// fresh read it returned, until the head holds a seat, or returns (nil,
// nil) when it should keep waiting, having reported why to w. st must be
// the head's own copy.
func (c *Coordinator) tryHead(ctx context.Context, s *Session, pool string, req claimRequest, st *poolState, p *claimPlan, w *waitTracker) (*Claim, error) {
	st.grantBehind(p, c.chainLimit())
	for {
		cl, resp, err := c.commit(ctx, s, pool, req, p)
		if err != nil || cl != nil {
			return cl, err
		}
		absorb(st, p, resp)
		if g := st.grantOf(queueName(req.lease, req.nonce)); g != nil {
			return c.fromGrant(s, pool, req, g) // granted by a head before us
		}
		if p, err = st.planBatch(req, c.chainLimit()); err != nil {
			return nil, c.headRefused(ctx, s, pool, err, st.stepOut(req.opts, err), req.opts, w)
		}
	}
}

// headRefused turns the head's refused plan into what it does next: nil to
// keep waiting, having reported why to w, or the error that ends its wait:
// so (poolState.stepOut), when its own constraints bar it.
func (c *Coordinator) headRefused(ctx context.Context, s *Session, pool string, err error, so *stepOutError, o claimOptions, w *waitTracker) error {
	switch {
	case ownLimit(err):
		w.set(waitStatusOf(err, o)) // what stepOut records
		return so
	case waitable(err):
		ws := waitStatusOf(err, o)
		ws.InLine = true
		w.set(ws)
		return nil
	case errors.Is(err, ErrPoolNotFound):
		return fmt.Errorf("%w: %q deleted while waiting", ErrPoolDeleted, pool)
	case errors.Is(err, ErrSessionExpired):
		return c.queueGone(ctx, s, pool)
	}
	return err
}
