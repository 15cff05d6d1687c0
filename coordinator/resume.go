package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Resuming after a restart. A claimant that restarts within its lease's TTL
// (a sidecar container restarted by the kubelet after a crash or an OOM kill)
// can take its session and its seat back instead of queueing again: it
// keeps the lease ID, the seat number and the token somewhere that survives
// the restart, then calls ResumeSession and Adopt.
//
// What this guarantees: ResumeSession returns a session only if the server
// answered a keepalive of the lease, and its local deadline is counted from
// that keepalive's send, as for NewSession. Adopt returns a claim only if
// the server's answer, at one revision, shows the seat key created at the
// token and bound to the session's lease. Both verdicts come from etcd, never
// from what the caller remembers.
//
// What it does NOT guarantee:
//
//   - that the previous process is gone. A lease ID is a bearer credential:
//     anyone who knows it can keep it alive. If the previous owner of the
//     lease is still running (paused, partitioned), it and the resumer both
//     act as the holder, under the same token, and fencing cannot tell them
//     apart. Resume only what a dead process held (a restarted container).
//   - that the seat is still held a moment later: watch Claim.Done.
//   - a place in the queue. A waiter's queue entry is not resumed; a
//     resumed session that claims again queues at the back, and the old
//     entry, still bound to the same lease, would stand ahead of it. Revoke
//     a waiter's lease instead of resuming it.

// ResumeSession takes over a live lease: it sends one keepalive and, if the
// server still has the lease, keeps it alive from then on exactly like
// NewSession. The session's TTL is the lease's own, as the server reports
// it (WithTTL is ignored); WithMargin and WithKeepAliveFailure apply. The
// local deadline starts when the first keepalive was SENT. ctx bounds that
// keepalive only. It returns an error wrapping ErrSessionExpired when the
// lease is gone; any other error leaves the question open (retry, or give
// the lease up).
func ResumeSession(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID, opts ...SessionOption) (*Session, error) {
	if cli == nil || lease == clientv3.NoLease {
		return nil, fmt.Errorf("%w: resume needs a client and a lease", ErrInvalid)
	}
	o := sessionOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	sent := time.Now()
	resp, err := cli.KeepAliveOnce(ctx, lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
		return nil, expiredErr(lease)
	case err != nil:
		return nil, fmt.Errorf("coordinator: resume lease %x: %w", lease, err)
	}
	o.ttl = time.Duration(resp.TTL) * time.Second
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("resume lease %x: %w", lease, err)
	}
	return startSession(cli, lease, o.ttl, sent, o), nil
}

// Adopt returns the claim on seat of pool that session s holds under token,
// for a claimant that lost its Claim (a restarted process) but resumed its
// session with ResumeSession. It reads the seat in one transaction whose
// compares, on the server, check that the seat key's create revision is
// token and that the key is bound to s's lease; if the seat is bound to an
// instance, that instance is read at the same revision. It returns an error
// wrapping ErrStaleToken if the seat is held under another token,
// ErrNotHeld if it is free or bound to another lease, ErrSessionExpired if
// s has ended. ctx bounds the reads.
//
// The claim behaves like one returned by Claim: Release is fenced by token
// and Done reports a loss, including one that happened before Adopt was
// called but after the revision it read. An instance that had already left
// at that revision is reported by Done as ErrInstanceGone. Unlike Claim,
// Adopt starts no pool feed (keepFeed): unless this process follows the
// pool for another reason, the release frees the seat without handing it
// to a waiter, and the head waiter claims it (handoff.go).
func (c *Coordinator) Adopt(ctx context.Context, s *Session, pool string, seat int, token int64) (*Claim, error) {
	if err := ValidateName(pool); err != nil {
		return nil, fmt.Errorf("pool: %w", err)
	}
	if s == nil || seat < 0 || seat >= MaxCapacity || token <= 0 {
		return nil, fmt.Errorf("%w: adopt needs a session, a seat in 0..%d and a positive token", ErrInvalid, MaxCapacity-1)
	}
	if s.Err() != nil {
		return nil, expiredErr(s.Lease())
	}
	ctx, cancel := s.bind(ctx) // its reads end with the session
	defer cancel()
	ended := func(err error) error { // what a read that failed says, once the session may have ended
		if !s.live() {
			return expiredErr(s.Lease())
		}
		return err
	}
	resp, err := c.cli.Get(ctx, slotPrefix(c.k.seats(pool), seat), clientv3.WithPrefix())
	if err != nil {
		return nil, ended(fmt.Errorf("coordinator: adopt pool %q seat %d: %w", pool, seat, err))
	}
	kvs := resp.Kvs
	if len(kvs) != 1 || kvs[0].CreateRevision != token || kvs[0].Lease != int64(s.Lease()) {
		return nil, notAdoptable(pool, seat, token, s.Lease(), kvs)
	}
	rec, err := decodeSeatRecord(kvs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("%w: %q (pool %q seat %d) has a value etcdpool did not write: %v", ErrForeignKey, kvs[0].Key, pool, seat, err)
	}
	if pk, err := c.k.parse(string(kvs[0].Key)); err != nil || pk.Claim != queueName(s.Lease(), rec.Nonce) {
		return nil, fmt.Errorf("%w: %q (pool %q seat %d) does not match its record, which etcdpool did not write", ErrForeignKey, kvs[0].Key, pool, seat)
	}
	inst, err := c.instanceAt(ctx, pool, rec.Instance, resp.Header.Revision)
	if err != nil {
		return nil, ended(err)
	}
	cl := c.newClaim(s, pool, seat, token, rec, inst)
	if !s.live() { // ended while it read: never hand out a claim past its session
		cl.lose(ErrClosed, "not adopted")
		return nil, expiredErr(s.Lease())
	}
	c.log.Debug("seat adopted", "pool", pool, "seat", seat, "token", token, "lease", fmt.Sprintf("%x", s.Lease()))
	return cl, nil
}

// notAdoptable tells why the seat key read by Adopt is not the claim.
func notAdoptable(pool string, seat int, token int64, lease clientv3.LeaseID, kvs []*mvccpb.KeyValue) error {
	switch {
	case len(kvs) == 0:
		return fmt.Errorf("%w: pool %q seat %d is free", ErrNotHeld, pool, seat)
	case kvs[0].CreateRevision != token:
		return fmt.Errorf("%w: pool %q seat %d is held under token %d, not %d", ErrStaleToken, pool, seat, kvs[0].CreateRevision, token)
	}
	return fmt.Errorf("%w: pool %q seat %d is bound to lease %x, not %x", ErrNotHeld, pool, seat, kvs[0].Lease, lease)
}

// instanceAt reads instance id of pool at revision rev: nil for an
// anonymous seat, only the ID if the instance was gone at rev (the claim's
// monitor then reports ErrInstanceGone).
func (c *Coordinator) instanceAt(ctx context.Context, pool, id string, rev int64) (*Instance, error) {
	if id == "" {
		return nil, nil
	}
	resp, err := c.cli.Get(ctx, c.k.instance(pool, id), clientv3.WithRev(rev))
	if err != nil {
		return nil, fmt.Errorf("coordinator: adopt: read instance %q: %w", id, err)
	}
	in := Instance{ID: id}
	if len(resp.Kvs) == 1 {
		in, _ = readInstance(id, resp.Kvs[0]) // what the seat was bound to, as it was
	}
	return &in, nil
}
