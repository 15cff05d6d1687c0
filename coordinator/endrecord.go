package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Why a seat went: the release record. A release writes its record
// (released/<seat number>) in the txn that deletes the seat key, and the
// holder's monitor, a retried Release and the event stream read it to
// tell a release, or a force-release, from an expiry. The key holds the
// seat number's last release only: by the time a holder reads it, a later
// holder of the same seat number (the waiter a hand-off gave it to, at
// once) may have released it too and overwritten ours, or its session
// may have ended and taken the record with it. So a reader that does not
// find this claim's token in the record as it is now reads it as of the
// revision that deleted this claim's seat key: that txn's own record, if
// it wrote one (endRecord).
//
// What it does not do: tell anything once etcd has compacted that
// revision. A reader then knows only what the record says now, as before.

// endLookup bounds the watch that finds the revision that deleted a seat
// key (deletedAt). etcd serves a watch from a past revision within about
// 100 ms (its unsynced-watcher loop); a lookup that takes longer says
// nothing, and its reader goes on without the record.
const endLookup = 2 * time.Second

// releaseIn decodes b, a release record's value (nil: no record), and
// reports whether it is a release of this claim (its token).
func (cl *Claim) releaseIn(b []byte) (releaseRecord, bool) {
	var rel releaseRecord
	ok := b != nil && json.Unmarshal(b, &rel) == nil && rel.Token == cl.token
	return rel, ok
}

// sameCall reports whether r, a record of this claim's token, was written
// by the release call that wrote ours: the same kind, reason, author and
// call time. A plain release of ours may have been recorded as the
// instance's loss (releaseOps).
func (r releaseRecord) sameCall(ours releaseRecord) bool {
	reason := r.Reason == ours.Reason || (!ours.Forced && ours.Reason == "" && r.Reason == ReasonInstanceGone)
	return r.Forced == ours.Forced && reason && r.By == ours.By && r.At.Equal(ours.At)
}

// releasedBy ends the claim whose seat went by the release r: Err says
// force-released, by whom and why, or released.
func (cl *Claim) releasedBy(r releaseRecord) {
	if r.Forced {
		cl.lose(ErrForceReleased, fmt.Sprintf("by %s: %s", r.By, r.Reason))
		return
	}
	cl.lose(ErrReleased, "")
}

// endRecord returns the release record that the txn which deleted this
// claim's seat key wrote, and whether it wrote one of this claim (a
// release or a force-release of it; an expiry, an instance's removal by
// another process or the pool's deletion write none of ours). del is that
// txn's revision when the caller knows it (the monitor's delete event);
// 0: it is looked up (deletedAt). It reports false, too, when etcd no
// longer has that revision or does not answer before ctx ends.
func (cl *Claim) endRecord(ctx context.Context, del int64) (releaseRecord, bool) {
	if del == 0 {
		if del = cl.deletedAt(ctx); del == 0 {
			return releaseRecord{}, false
		}
	}
	resp, err := cl.c.cli.Get(ctx, cl.c.k.released(cl.pool, cl.seat), clientv3.WithRev(del))
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != del {
		return releaseRecord{}, false // not written by the deleting txn
	}
	return cl.releaseIn(resp.Kvs[0].Value)
}

// deletedAt returns the revision that deleted this claim's seat key, from
// a watch of the key from the revision after its token: a seat key is
// written once, so the first delete is its end. 0 when etcd has compacted
// that history, or the key is not deleted within endLookup (the caller
// found it gone, so only a lookup that etcd does not answer in time).
func (cl *Claim) deletedAt(ctx context.Context) int64 {
	ctx, cancel := context.WithTimeout(ctx, endLookup)
	defer cancel()
	for wr := range cl.c.cli.Watch(clientv3.WithRequireLeader(ctx), cl.key(), clientv3.WithRev(cl.token+1)) {
		if wr.Err() != nil {
			return 0
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return ev.Kv.ModRevision
			}
		}
	}
	return 0
}
