package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The claim path, one concern per file: this file runs the plan -> txn loop
// and turns a committed txn into a Claim; cache.go keeps the shared pool
// state plans are built from; plan.go builds the transaction; ambiguous.go
// resolves a txn whose outcome is unknown; queue.go waits in line;
// holder.go is the Claim itself and its monitor.

// Claim takes one seat of pool for session s in one etcd transaction when
// the pool's cached state is current and a seat is free. With WithWait it
// queues behind earlier waiters and blocks until granted; otherwise it
// returns ErrNoSeat when no seat can be taken now. ctx bounds the whole
// call, queueing included; a cancelled wait leaves no key behind.
//
// Claim guarantees that the seat, tenant and instance limits held at the
// revision the seat was granted, and that a claim is never granted to a
// waiter whose queue key is gone. It never returns a claim whose session
// is past its local deadline, and it returns ErrSessionExpired promptly
// (within scheduling delay) once the session ends, wherever it is waiting.
// It does not guarantee the holder keeps the seat: watch Done.
//
// In a pool of at most 64 seats, the process follows the pool (one watch
// and one read of the pool, shared by its claimants) while it holds a seat
// and for two seconds after, so that a release can hand the seat to the
// first waiter in its own transaction (handoff.go).
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
	bctx, cancel := s.bind(ctx)
	nonce, spoiled := s.names.take(), new(atomic.Bool)
	cl, err := c.claim(bctx, s, pool, claimRequest{opts: o, lease: s.Lease(), nonce: nonce, spoiled: spoiled})
	if err != nil && ctx.Err() == nil && bctx.Err() != nil {
		err = context.Cause(bctx) // the session ended: say so, not "context canceled"
	}
	cancel()
	switch {
	case err == nil:
		cl.reusable.Store(!spoiled.Load()) // given back at its release
	case !spoiled.Load():
		s.names.give(nonce) // nothing of it is left (names.go)
	}
	switch {
	case err == nil:
		c.keepFeed(cl)
		c.metrics.ClaimResult(pool, ResultGranted)
		c.metrics.GrantWait(pool, time.Since(start))
		if c.log.Enabled(ctx, slog.LevelDebug) { // not formatted for nothing on the grant path
			c.log.Debug("seat claimed", "pool", pool, "seat", cl.seat, "token", cl.token, "lease", fmt.Sprintf("%x", s.Lease()))
		}
	case errors.Is(err, ErrNoSeat):
		c.metrics.ClaimResult(pool, ResultNoSeat)
	case errors.Is(err, ErrPoolNotFound) || errors.Is(err, ErrPoolDeleted):
		c.forgetMissing(pool)
		c.metrics.ClaimResult(pool, ResultError)
	case ctx.Err() != nil:
		c.metrics.ClaimResult(pool, ResultCanceled)
	default:
		c.metrics.ClaimResult(pool, ResultError)
	}
	return cl, err
}

// defaultHolder is the holder a claim records when WithHolder is not
// given: this process's host name and pid, read once (a read of the host
// name is a syscall, and a claim has no other use for one).
var defaultHolder = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil {
		h = "unknown"
	}
	return fmt.Sprintf("%s/%d", h, os.Getpid())
})

// claim loops plan -> txn on the shared cached state. A decision to refuse
// is only taken on state read during this call.
func (c *Coordinator) claim(ctx context.Context, s *Session, pool string, req claimRequest) (*Claim, error) {
	sh := c.shared(pool)
	fresh := false
	contention := contentionRetry.Backoff()
	for failed := 0; ; {
		if err := alive(ctx, s); err != nil {
			return nil, err
		}
		p, err := sh.plan(req)
		switch {
		case err == nil:
		case errors.Is(err, errSeatsBusy) || req.opts.wait && waitable(err) && sh.current():
			// A waiter queues without reading first when every free seat
			// is being claimed by a txn of this process in flight, or when
			// the feed keeps the view exact. Queueing refuses nothing: once
			// the waiter is head it plans on the feed, which wakes it on
			// every change, so a seat a stale view missed, or a claim in
			// flight failed to take, is still taken. The read that a claim
			// without wait makes before refusing would cost each waiter a
			// whole-pool read for nothing.
			return c.wait(ctx, s, pool, req)
		case errors.Is(err, errNeedWhole) || !fresh:
			// Read before refusing; and the whole pool when the free seat
			// lies where a probe does not look.
			whole := errors.Is(err, errNeedWhole)
			if err := c.refreshShared(ctx, s, sh, pool, req, whole); err != nil {
				return nil, err
			}
			fresh = true
			if whole {
				// Another claimant's probe may replace the whole read before
				// this one plans on it: count it as a failed try.
				failed++
				c.backOff(ctx, pool, failed, contention)
			}
			continue
		case waitable(err) && req.opts.wait:
			return c.wait(ctx, s, pool, req)
		default:
			return nil, err
		}
		cl, resp, err := c.commit(ctx, s, pool, req, p)
		sh.landed(p)
		if err != nil {
			return nil, err
		}
		read := sh.absorb(p, resp)
		if cl != nil {
			return cl, nil
		}
		fresh = read // the failed txn's Else branch re-read the pool, unless a feed's state stood in for it
		failed++
		c.backOff(ctx, pool, failed, contention)
	}
}

// backOff sleeps after the second failed try of a claim: contention, or a
// compare the state cannot explain, is waited out with jitter, not spun on.
func (c *Coordinator) backOff(ctx context.Context, pool string, failed int, b backoffs) {
	if failed <= 2 {
		return
	}
	c.pause(ctx, nil, b, pool, RetryContention, nil)
}

// alive reports why a claimant can no longer go on, or nil.
func alive(ctx context.Context, s *Session) error {
	if !s.live() {
		return s.lostErr()
	}
	return ctx.Err()
}

// commit sends one claim transaction. It returns the claim when the txn
// succeeded, or the response whose Else branch holds a fresh read of the
// pool. An ambiguous failure is resolved before it returns (see resolve).
func (c *Coordinator) commit(ctx context.Context, s *Session, pool string, req claimRequest, p *claimPlan) (*Claim, *clientv3.TxnResponse, error) {
	c.metrics.ClaimTxn(pool)
	read := []clientv3.Op{clientv3.OpGet(c.k.pool(pool), clientv3.WithPrefix())}
	if p.probe {
		read = c.k.probeOps(pool, req)
	}
	resp, err := c.cli.Txn(ctx).If(p.cmps...).Then(append(p.ops, p.grants...)...).Else(read...).Commit()
	switch {
	case err == nil && resp.Succeeded:
		cl, err := c.keepIfLive(c.newClaim(s, pool, p.seat, resp.Header.Revision, p.rec, p.inst))
		return cl, resp, err
	case err == nil:
		return nil, resp, nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return nil, nil, s.lostErr()
	case errors.Is(err, rpctypes.ErrTooManyOps) && len(p.grants) > 0:
		// etcd refused the chain of grants (its --max-txn-ops is set below
		// maxTxnOps, grant.go), and so applied nothing: the head claims
		// alone, the next head grants the waiters behind it, and chains
		// carry fewer grants from now on (chainLimit).
		if c.refusedChain(p.chainOps, p.ownOps()) {
			c.log.Warn("etcd refused the grants behind the head as too many operations; claiming alone, and chaining fewer grants from now on (is etcd's --max-txn-ops below 128?)",
				"pool", pool, "ops", p.chainOps, "limit", c.chainLimit(), "err", err)
		}
		p.grants = nil
		return c.commit(ctx, s, pool, req, p)
	}
	p.probe = false // resolve reads the whole pool
	return c.resolve(ctx, s, pool, req, err)
}

// keepIfLive returns cl, a seat etcd granted, unless its session is past
// its local deadline by now: then the seat may already be free for others
// on the server, so it is released (fenced by its token) in the background
// and the claimant gets ErrSessionExpired. For a borrowed session that
// release is tried until it passes or etcd says the seat is gone: the
// lease's owner may keep it alive through another process
// (TestBorrowedGiveUpFreesSeat).
func (c *Coordinator) keepIfLive(cl *Claim) (*Claim, error) {
	s := cl.sess
	if s.live() {
		return cl, nil
	}
	return nil, c.giveUp(cl, s.lostErr(), "", ReasonExpired)
}

// giveUp closes cl's Done with err (and detail), releases its seat, fenced
// by its token, in the background with reason, and returns cl's error.
// The release is tried until it passes or the lease is gone (cleanUp);
// each try is one call's, so a try that finds the seat gone tells an
// earlier one's success by its record.
func (c *Coordinator) giveUp(cl *Claim, err error, detail, reason string) error {
	cl.lose(err, detail)
	rel := releaseRecord{Reason: reason, By: cl.rec.Holder, At: time.Now().UTC()}
	c.goBackground(func(bctx context.Context) {
		c.cleanUp(bctx, cl.sess, cl.pool, RetryRelease, "a seat given up", func(ctx context.Context) error {
			if err := cl.release(ctx, rel); err != nil && !errors.Is(err, ErrNotHeld) {
				return err
			}
			return nil
		})
	})
	return cl.Err()
}
