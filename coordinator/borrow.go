package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Borrowed sessions. A server that claims seats on behalf of remote clients
// (the HTTP API) holds no lease of its own for them: each client's session
// is a lease that the client keeps alive, through any server replica. Such a
// server borrows the lease with BorrowSession to call Claim, Adopt and
// Release, without ever keeping the lease alive itself and without revoking
// it when it is done.
//
// A borrowed session follows the lease instead of renewing it: it asks the
// server how long the lease has left (LeaseTimeToLive, which does not
// renew) every TTL/3, or sooner when its deadline is near, and moves its
// local deadline to the time the question was SENT plus the time left,
// minus the margin. etcd reports the time left in whole seconds, rounded
// down, so the deadline is conservative. Done closes when the server reports
// the lease gone, or when the deadline passes without an answer; a client
// that stops its keepalives therefore ends the borrowed session as well.
//
// What it does NOT guarantee: that the lease's owner acts on a loss. The
// borrower learns of a loss no earlier than the owner would; the owner must
// keep its own deadline (the last keepalive it SENT plus the TTL).
//
// A borrowed session that ends at its local deadline says nothing of the
// lease, which its owner may keep alive through another process (a replica
// of the HTTP API cut off from etcd, while the client renews through
// another). So what a claim of it may have left (a queue key or a seat of
// a lost attempt, a seat granted after its deadline, a waiting record) is
// still removed once etcd answers again, until etcd says the lease is gone
// (cleanUp), not left to go with the lease.

// BorrowSession returns a Session on a live lease that someone else keeps
// alive. It never sends a keepalive, and Close does not revoke the lease.
// The session's TTL is the lease's granted TTL; WithMargin and
// WithKeepAliveFailure (called when a TimeToLive request fails) apply,
// WithTTL is ignored. ctx bounds the first TimeToLive request only. It
// returns an error wrapping ErrSessionExpired when the lease is gone or has
// no more than the margin left; any other error leaves the question open.
func BorrowSession(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID, opts ...SessionOption) (*Session, error) {
	if cli == nil || lease == clientv3.NoLease {
		return nil, fmt.Errorf("%w: borrow needs a client and a lease", ErrInvalid)
	}
	o := sessionOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	sent := time.Now()
	resp, err := cli.TimeToLive(ctx, lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL < 0):
		return nil, expiredErr(lease)
	case err != nil:
		return nil, fmt.Errorf("coordinator: borrow lease %x: %w", lease, err)
	}
	o.ttl, o.borrowed = time.Duration(resp.GrantedTTL)*time.Second, true
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("borrow lease %x: %w", lease, err)
	}
	left := time.Duration(resp.TTL) * time.Second
	if left <= o.margin {
		return nil, fmt.Errorf("%w: lease %x: %w: %v left (whole seconds), no more than the margin %v", ErrSessionExpired, lease, ErrLeaseEnding, left, o.margin)
	}
	// startSession counts the deadline as sent + TTL - margin; the lease
	// has left, not TTL, from sent.
	return startSession(cli, lease, o.ttl, sent.Add(left-o.ttl), o), nil
}

// Borrowed reports whether the session was made by BorrowSession.
func (s *Session) Borrowed() bool { return s.borrowed }

// leaseDone is what ends the cleanup of what a claim of s may have left
// (reap): s's end; never, for a borrowed session, whose lease its owner
// may keep alive past s's local deadline: the cleanup then ends when etcd
// says the lease is gone.
func (s *Session) leaseDone() <-chan struct{} {
	if s.borrowed {
		return nil
	}
	return s.Done()
}

// followLease is the loop of a borrowed session, in place of keepAlive: it
// asks how long the lease has left and moves the deadline; it never renews
// the lease. The watchdog ends the session at the deadline.
func (s *Session) followLease(ctx context.Context) {
	for {
		wait := max(min(s.ttl/3, time.Until(s.Deadline())/2), 100*time.Millisecond)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if ended, _ := s.renew(ctx, func(ctx context.Context) (int64, error) {
			resp, err := s.cli.TimeToLive(ctx, s.id)
			if err != nil {
				return 0, err
			}
			return resp.TTL, nil
		}); ended {
			return
		}
	}
}

// cleanUp runs f, which removes something a claim of s may have left (a
// seat, a queue key, a waiting record), until it succeeds, at reapRetry's
// pace, each retry counted as op. It stops at s.leaseDone(): the session's
// end, whose lease takes what is left with it; for a borrowed session,
// never, so f must succeed once nothing is left (a delete of a key gone,
// a release told ErrNotHeld, a reap that finds the lease gone). ctx, the
// Coordinator's, ends it too. A refusal (permission denied) does not end
// it: nobody waits on it to be told, and what it removes would stay, held
// by nobody, for as long as the lease lives. So it is logged as a
// warning, once, naming what, and tried again at the same pace, which
// removes it once etcd allows it (TestReapRefusedWarnsAndRecovers).
func (c *Coordinator) cleanUp(ctx context.Context, s *Session, pool, op, what string, f func(context.Context) error) {
	warned := false
	for b := reapRetry.Backoff(); ; {
		rctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
		err := f(rctx)
		cancel()
		if err == nil {
			return
		}
		if !warned && etcdclient.IsPermanent(err) {
			warned = true
			c.log.Warn("etcd refuses a cleanup; what it removes stays until etcd allows it (retried) or the lease ends",
				"pool", pool, "what", what, "lease", fmt.Sprintf("%x", s.Lease()), "err", err)
		}
		select {
		case <-s.leaseDone():
			return // it goes with the lease; no retry to count
		default:
		}
		if !c.pause(ctx, s.leaseDone(), b, pool, op, err) {
			return
		}
	}
}
