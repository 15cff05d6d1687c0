package coordinator

import (
	"context"
	"time"
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
	if err := validHolder("release by", by); err != nil {
		return err
	}
	return cl.release(ctx, releaseRecord{By: by, At: time.Now().UTC()})
}

// ForceReleaseBy frees the claim's seat on an operator's behalf, fenced by
// its token, recording reason and by, the authenticated operator, instead
// of this process's host and pid: the holder's Claim.Err then reads
// "by <by>: <reason>". An operator that does not hold the claim gets it
// with Adopt on a session borrowed from the holder's lease (BorrowSession).
// It returns ErrNotHeld when the seat was already gone.
func (cl *Claim) ForceReleaseBy(ctx context.Context, reason, by string) error {
	if err := validHolder("force-release by", by); err != nil {
		return err
	}
	if err := validText("force-release reason", reason); err != nil {
		return err
	}
	return cl.release(ctx, releaseRecord{Forced: true, Reason: reason, By: by, At: time.Now().UTC()})
}
