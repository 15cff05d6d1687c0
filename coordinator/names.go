package coordinator

import (
	"math/rand/v2"
	"sync"
)

// Claim names. Every key a claim writes ends in its name, <lease>-<nonce>
// (keys.go): its queue key, its seat and slot keys. etcd
// keeps a deleted key in its index until the next compaction, and a range
// compare visits every such key in its range: the seat slot prefix and the
// queue range that each claim compares. With a new name per claim, a claim
// would cost more for every claim made since etcd last compacted.
//
// So a session reuses the nonce of a claim that ended cleanly. The keys
// under any range are then at most the sessions that used it times their
// concurrent claims, compacted or not, and etcd finds the live generation
// of a reused key without walking its history.
//
// A name is reused only when nothing written under it is left and nothing
// can still be written under it. Claim decides that when it returns:
//
//   - a claim it returned is given back once its Release commits. That txn
//     deletes the seat and its slot keys; its queue key went in the txn
//     that granted the seat.
//   - a failed Claim gives its name back at once, unless something was left
//     in doubt. Every place that may leave a key behind marks the request
//     spoiled (claimRequest.spoil): an ambiguous txn that resolve could not
//     settle, a waiting record whose put failed (it may still land), a
//     queue key or waiting record whose delete failed, a seat
//     granted to a waiter that had given up, a requeue under a new name.
//     An ambiguous attempt that resolve did settle leaves nothing unknown:
//     it was adopted, or the fence stops it from ever applying.
//
// A spoiled name, a lost or force-released seat, and the names of a resumed
// session are never reused; the next claim takes a random nonce. Reuse
// never weakens a fence: every compare is on revisions, and a reused key is
// created anew, at a new revision.
type names struct {
	mu   sync.Mutex
	free []uint64
}

// take returns a nonce for a new claim of the session: one given back, or
// a random one.
func (n *names) take() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if k := len(n.free); k > 0 {
		nonce := n.free[k-1]
		n.free = n.free[:k-1]
		return nonce
	}
	return rand.Uint64()
}

// give returns the nonce of a claim that ended cleanly (see above). The
// caller gives each nonce back at most once.
func (n *names) give(nonce uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.free = append(n.free, nonce)
}
