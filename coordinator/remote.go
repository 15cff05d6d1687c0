package coordinator

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Claims held by remote clients. A server that claims on behalf of a
// remote client (the HTTP API) hands the seat over and forgets the Claim;
// later requests find it again with Adopt. The release record of such a
// seat names the authenticated principal that released it, not a string
// the client chose.

// Detach stops tracking the claim in this process without releasing it:
// Done closes with ErrClosed (not counted as a lost seat), the monitor, if
// any, stops, and the claim no longer follows its session. The seat stays
// held, bound to its session's lease. Use it once a claim has been handed
// to a remote holder. It is idempotent and does nothing after a loss.
func (cl *Claim) Detach() { cl.lose(ErrClosed, "detached: the seat is held by a remote client") }

// ReleaseBy is Release with the release record's "by" set to by, the
// authenticated identity releasing the seat, instead of the claim's holder.
func (cl *Claim) ReleaseBy(ctx context.Context, by string) error {
	if by == "" || len(by) > MaxHolderLen {
		return fmt.Errorf("%w: release by must be 1..%d bytes", ErrInvalid, MaxHolderLen)
	}
	return cl.release(ctx, releaseRecord{By: by, At: time.Now().UTC()})
}

// ForceReleaseBy is ForceRelease with the release record's "by" set to by,
// the authenticated operator, instead of this process's host and pid. The
// holder's Claim.Err then reads "by <by>: <reason>".
func (c *Coordinator) ForceReleaseBy(ctx context.Context, pool string, seat int, token int64, reason, by string) (Seat, error) {
	if by == "" || len(by) > MaxHolderLen {
		return Seat{}, fmt.Errorf("%w: force-release by must be 1..%d bytes", ErrInvalid, MaxHolderLen)
	}
	cur, err := c.Seat(ctx, pool, seat)
	if err != nil {
		return Seat{}, err
	}
	if cur.Token != token {
		return cur, fmt.Errorf("%w: pool %q seat %d is held under token %d, not %d", ErrStaleToken, pool, seat, cur.Token, token)
	}
	rec := seatRecord{Holder: cur.Holder, Tenant: cur.Tenant, Instance: cur.Instance, TenantSlot: cur.tenantSlot, BindSlot: cur.bindSlot, Grant: cur.grant}
	ops := c.releaseOps(pool, seat, token, cur.Lease, rec, releaseRecord{Forced: true, Reason: reason, By: by, At: time.Now().UTC()})
	key := c.k.seat(pool, seat)
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", token)).Then(ops...).Commit()
	if err != nil {
		return Seat{}, fmt.Errorf("coordinator: force-release pool %q seat %d: %w", pool, seat, err)
	}
	if !resp.Succeeded {
		return cur, fmt.Errorf("%w: pool %q seat %d changed hands", ErrStaleToken, pool, seat)
	}
	c.log.Info("seat force-released", "pool", pool, "seat", seat, "token", token, "reason", reason, "by", by)
	return cur, nil
}
