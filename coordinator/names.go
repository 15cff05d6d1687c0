package coordinator

import (
	"math/rand/v2"
	"sync"
)

// Claim names. Every key a claim writes ends in its name, <lease>-<nonce>
// (keys.go): its queue key, its grant key, its seat and slot keys. etcd
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
// can still be written under it:
//
//   - a claim that Claim returned, once its Release committed. That one
//     txn deletes the seat, its slot keys and its grant key; the queue key
//     went in the txn that granted the seat. An ambiguous attempt of the
//     claim was settled by resolve before Claim returned: adopted, or made
//     unable to apply by the fence.
//   - a claim without WithWait that Claim refused with ErrNoSeat: it wrote
//     nothing, and resolve settled any ambiguous attempt the same way.
//
// Any other end retires the name: a claim that waited and gave up (its
// queue key may still be being removed), a seat that was lost or
// force-released, a requeue after stepping out of line, a resumed session.
// A retired name is never reused; the next claim takes a random nonce.
// Reuse never weakens a fence: every compare is on revisions, and a reused
// key is created anew, at a new revision.
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
