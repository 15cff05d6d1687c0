package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// heldSeat names the keys of a held seat: what a release deletes.
type heldSeat struct {
	pool  string
	seat  int
	token int64
	lease clientv3.LeaseID
	claim string // <lease>-<nonce>, the last segment of each key
	rec   seatRecord
}

func (cl *Claim) held() heldSeat {
	return heldSeat{pool: cl.pool, seat: cl.seat, token: cl.token, lease: cl.sess.Lease(), claim: cl.claim, rec: cl.rec}
}

// slotKeys returns the seat key and the tenant and instance slot keys
// taken with it.
func (h heldSeat) slotKeys(k keys) []string {
	out := []string{k.seat(h.pool, h.seat, h.claim)}
	if h.rec.TenantSlot >= 0 && h.rec.Tenant != "" {
		out = append(out, k.tenant(h.pool, h.rec.Tenant, h.rec.TenantSlot, h.claim))
	}
	if h.rec.BindSlot >= 0 && h.rec.Instance != "" {
		out = append(out, k.bind(h.pool, h.rec.Instance, h.rec.BindSlot, h.claim))
	}
	return out
}

// releaseOps deletes a seat and the slot keys taken with it, each fenced by
// the token, and records who released it. The caller compares the seat's
// token. The slot deletes sit in nested txns so that a slot key whose
// create revision is not the token (only possible by hand) is left alone.
//
// The release record is bound to the holder's lease: it tells the holder's
// monitor why its seat went (and lets a retried Release recognise its own
// earlier success), and it goes with the holder's session, so records never
// pile up. Watchers see it in the same revision as the seat's delete. (The
// txn's compare on the seat key proves the lease is alive when it applies.)
func (c *Coordinator) releaseOps(h heldSeat, rel releaseRecord) []clientv3.Op {
	var ops []clientv3.Op
	for i, key := range h.slotKeys(c.k) {
		if i == 0 {
			ops = append(ops, clientv3.OpDelete(key))
			continue
		}
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", h.token)},
			[]clientv3.Op{clientv3.OpDelete(key)}, nil))
	}
	rel.Token = h.token
	put := func(r releaseRecord) clientv3.Op {
		return clientv3.OpPut(c.k.released(h.pool, h.seat), string(r.encode()), clientv3.WithLease(h.lease))
	}
	if rel.Forced || rel.Reason != "" || h.rec.Instance == "" {
		return append(ops, put(rel))
	}
	// A bound seat released after its instance went (held for the hold,
	// holder.go) records that loss, so the pool's events count it as such:
	// etcd tells, whichever process releases it. The instance is the one
	// the seat was granted on while its key was created before the grant.
	key := c.k.instance(h.pool, h.rec.Instance)
	gone := rel
	gone.Reason = ReasonInstanceGone
	return append(ops, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0), clientv3.Compare(clientv3.CreateRevision(key), "<", h.token)},
		[]clientv3.Op{put(rel)}, []clientv3.Op{put(gone)}))
}

// owner compares the seat key's create revision with the token: true
// while this claim holds the seat.
func (h heldSeat) owner(k keys) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(k.seat(h.pool, h.seat, h.claim)), "=", h.token)
}

// releaseTxn is the release txn of h, whose writes are ops (releaseOps),
// with the hand-off next joined to it (nil: none). Its Else reads the
// seat's release record, which tells a retry whether an earlier try
// released the seat.
func (c *Coordinator) releaseTxn(h heldSeat, ops []clientv3.Op, next *claimPlan) (cmps []clientv3.Cmp, then, els []clientv3.Op) {
	cmps, then = []clientv3.Cmp{h.owner(c.k)}, ops
	if next != nil {
		cmps, then = append(cmps, next.cmps...), append(ops[:len(ops):len(ops)], next.ops...)
	}
	return cmps, then, []clientv3.Op{clientv3.OpGet(c.k.released(h.pool, h.seat))}
}

// Release gives the seat back. It is fenced by the token: it deletes the
// seat only if this claim still holds it, so a late or repeated release never
// frees a newer holder's seat. It returns nil when it freed the seat and
// ErrNotHeld when the seat was already gone (released before, expired,
// force-released). ctx bounds the call; an ambiguous failure is retried
// until ctx is done, which is safe because the release is idempotent: a
// retry that finds the seat gone tells an earlier try's success by the
// release record of this very call (endrecord.go), and says ErrNotHeld
// when it cannot, etcd having compacted the revision that would tell. A
// refusal that retrying cannot pass (permission denied) is returned at
// once: that try applied nothing, so the seat is still held, unless an
// earlier try whose answer was lost had released it.
//
// When this process knows of claimants waiting on the pool, the same
// transaction hands the seat to the first of them that may take it (see
// handoff.go).
func (cl *Claim) Release(ctx context.Context) error {
	return cl.release(ctx, releaseRecord{By: cl.rec.Holder, At: time.Now().UTC()})
}

// release deletes the seat, fenced by its token, writing rel as the record,
// and hands the seat off if it can.
func (cl *Claim) release(ctx context.Context, rel releaseRecord) error {
	c := cl.c
	defer cl.startRelease()()
	h := cl.held()
	ops := c.releaseOps(h, rel)
	next, done := c.handoff(h, ops)
	defer done()
	b := releaseRetry.Backoff()
	var denied error // etcd's lasting refusal of the hand-off (handoff.go)
	for lost := false; ; {
		cmps, then, els := c.releaseTxn(h, ops, next)
		resp, err := c.cli.Txn(ctx).If(cmps...).Then(then...).Else(els...).Commit()
		switch {
		case err == nil && (resp.Succeeded || (lost && cl.releasedByUs(ctx, rangeKvs(resp), rel))):
			// A retry that finds our own release record: an earlier try
			// committed and its answer was lost.
			cl.releasedBy(rel)
			cl.freedOnce.Do(func() { close(cl.freedc) })
			c.released(cl, next)
			if denied != nil {
				c.deniedHandoff(cl.pool, time.Now())
				c.log.Warn("etcd refused a hand-off but not the release alone; this pool's releases go alone for "+deniedHandoffFor.String(),
					"pool", cl.pool, "seat", cl.seat, "err", denied)
			}
			if cl.reusable.CompareAndSwap(true, false) {
				cl.sess.names.give(cl.rec.Nonce) // every key of its name is gone (names.go)
			}
			return nil
		case err == nil && next != nil:
			// The hand-off's view was stale, or the seat is gone: the
			// release alone tells which (handoff.go).
			c.log.Debug("hand-off refused; releasing alone", "pool", cl.pool, "seat", cl.seat, "token", cl.token)
			next = nil
			continue
		case err == nil:
			// Tell Err why the seat was already gone; not under the
			// caller's ctx, whose end would read as a lost seat.
			cctx, cancel := c.cleanupCtx()
			cl.classify(cctx, 0)
			cancel()
			return fmt.Errorf("%w: pool %q seat %d token %d", ErrNotHeld, cl.pool, cl.seat, cl.token)
		case etcdclient.IsPermanent(err):
			// Refused, not lost (permission denied, say): this try applied
			// nothing. If it carried a hand-off, the refusal may be of
			// what the hand-off added (too many operations for etcd's
			// --max-txn-ops): the release alone tells. Else retrying
			// cannot pass.
			if next != nil {
				if !errors.Is(err, rpctypes.ErrTooManyOps) {
					denied = err // the hand-off's, if the release alone passes
				} else if c.refusedHandoff(txnCount(cmps, then, els)) {
					c.log.Warn("etcd refused a hand-off; releasing alone", "pool", cl.pool, "seat", cl.seat, "err", err)
				}
				next = nil
				continue
			}
			if lost {
				err = fmt.Errorf("an earlier try's answer was lost, and it may have released the seat: %w", err)
			}
			return fmt.Errorf("coordinator: release pool %q seat %d: %w", cl.pool, cl.seat, err)
		}
		lost, next = true, nil // whether or not it applied, the retry is the release alone
		if !c.pause(ctx, nil, b, cl.pool, RetryRelease, err) {
			return fmt.Errorf("coordinator: release pool %q seat %d: %w", cl.pool, cl.seat, err)
		}
	}
}

// releasedByUs reports whether this very release call, writing the record
// ours, committed in a try whose answer was lost: kvs is the seat number's
// release record as the retry read it. Only that call's txn writes a
// record with our token and every field of ours (by, forced, reason and
// at, the time of the call). The key holds the seat number's last release,
// so a later holder's release may have overwritten ours before the retry
// read it (a hand-off gives the seat number to the next holder at once):
// then the record that the txn which deleted our seat key wrote tells
// (endRecord).
func (cl *Claim) releasedByUs(ctx context.Context, kvs []*mvccpb.KeyValue, ours releaseRecord) bool {
	var b []byte
	if len(kvs) == 1 {
		b = kvs[0].Value
	}
	if rel, ok := cl.releaseIn(b); ok {
		return rel.sameCall(ours)
	}
	rel, ok := cl.endRecord(ctx, 0)
	return ok && rel.sameCall(ours)
}

// ForceRelease frees a seat on an operator's behalf, only if it is still
// held under token (ErrStaleToken otherwise, ErrSeatNotFound if nobody
// holds it). It records the reason; the holder's Done closes with
// ErrForceReleased carrying it. The holder's process is not stopped by this:
// it learns of the loss through Done, and a holder that is paused or cut off
// may keep working until its own writes fail their IsOwner fence.
func (c *Coordinator) ForceRelease(ctx context.Context, pool string, seat int, token int64, reason string) (Seat, error) {
	if err := validText("force-release reason", reason); err != nil {
		return Seat{}, err
	}
	cur, err := c.Seat(ctx, pool, seat)
	if err != nil {
		return Seat{}, err
	}
	if cur.Token != token {
		return cur, fmt.Errorf("%w: pool %q seat %d is held under token %d, not %d", ErrStaleToken, pool, seat, cur.Token, token)
	}
	h := heldSeat{pool: pool, seat: seat, token: token, lease: cur.Lease, claim: cur.claim,
		rec: seatRecord{Holder: cur.Holder, Tenant: cur.Tenant, Instance: cur.Instance, TenantSlot: cur.tenantSlot, BindSlot: cur.bindSlot}}
	ops := c.releaseOps(h, releaseRecord{Forced: true, Reason: reason, By: defaultHolder(), At: time.Now().UTC()})
	resp, err := c.cli.Txn(ctx).If(h.owner(c.k)).Then(ops...).Commit()
	if err != nil {
		return Seat{}, fmt.Errorf("coordinator: force-release pool %q seat %d: %w", pool, seat, err)
	}
	if !resp.Succeeded {
		return cur, fmt.Errorf("%w: pool %q seat %d changed hands", ErrStaleToken, pool, seat)
	}
	c.log.Info("seat force-released", "pool", pool, "seat", seat, "token", token, "reason", reason)
	return cur, nil
}

// Seat reads one held seat. ErrSeatNotFound if nobody holds it.
func (c *Coordinator) Seat(ctx context.Context, pool string, seat int) (Seat, error) {
	if err := ValidateName(pool); err != nil {
		return Seat{}, fmt.Errorf("pool: %w", err)
	}
	if seat < 0 || seat >= MaxCapacity {
		return Seat{}, fmt.Errorf("%w: seat %d is outside 0..%d", ErrInvalid, seat, MaxCapacity-1)
	}
	resp, err := c.cli.Get(ctx, slotPrefix(c.k.seats(pool), seat), clientv3.WithPrefix())
	if err != nil {
		return Seat{}, fmt.Errorf("coordinator: get seat: %w", err)
	}
	if len(resp.Kvs) == 0 {
		if _, err := c.GetPool(ctx, pool); errors.Is(err, ErrPoolNotFound) {
			return Seat{}, err
		}
		return Seat{}, fmt.Errorf("%w: pool %q seat %d", ErrSeatNotFound, pool, seat)
	}
	s, ok := c.seatOf(pool, resp.Kvs[0])
	if !ok {
		return Seat{}, fmt.Errorf("%w: %q (pool %q seat %d) has a value etcdpool did not write", ErrForeignKey, resp.Kvs[0].Key, pool, seat)
	}
	return s, nil
}
