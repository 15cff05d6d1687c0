package coordinator

import (
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Hand-off on release. When a holder releases while others wait, its
// release transaction grants the freed seat to the first waiter that may
// take it: the compares and writes of a grant built like one by the head
// (grant.go) join the release's own. They re-check that waiter's queue
// key, fence and slots, write the waiter's seat and slot keys under the
// waiter's lease and delete its queue key. The waiter wakes on that delete
// and finds the seat by its name. So a seat passes from holder to waiter in
// one transaction, instead of a release, a watch event and the waiter's
// own claim txn.
//
// The grant is not a nested txn, although a nested one would let the
// release apply when the grant's compares fail: etcd takes measurably
// longer over a txn that nests one, even in a branch it does not take
// (BenchmarkReleaseToGrant). So when any compare fails nothing applies,
// and the release is sent again alone (Claim.release): a stale view costs
// the release one more round trip, and the head waiter then claims the
// seat itself as before.
//
// The seat and slots the release frees are reused in the same txn. That is
// possible because each holder's keys are named after its claim (keys.go):
// the release deletes <slot>/<releaser> and the grant creates
// <slot>/<waiter>. The grant's compare on such a slot is that the only key
// under its prefix is the releaser's, by its token (takeSlot), as it is
// before the txn's writes; so the slot never holds two keys.
//
// The releaser plans the hand-off from this process's view of the pool:
// the shared state, which the pool feed keeps exact while this process
// waits on the pool or holds one of its seats, if the pool has at most
// maxFedHolders seats (keepFeed); or which a claim that read the whole
// pool last (rather than a probe, probe.go). So in such a pool a release
// hands off to the first waiter whichever process it is in. What it does
// not do: a holder in a larger pool whose process does not wait on it,
// one that releases before its feed has synced (two round trips after
// its claim), or a claim taken back with Adopt, which keeps no feed,
// frees the seat and the head claims it; a release whose
// first waiter may take a seat free already leaves both seats to the head
// (planHandoff); and releases of several processes at once all aim at the
// first waiter, so all but one of them are sent again alone.

// handoff plans the grant of the seat h frees to the first waiter in this
// process's view that may take it, or returns a nil plan. The plan's
// compares and writes are to be added to the release txn.
//
// One release of a process hands off at a time; releases made meanwhile
// only free their seats, which the head then claims, several in one txn
// (grant.go). Aiming them at the same first waiter would make all but one
// fail; aiming them at the next waiters would grant those while the first
// still waits whenever the first hand-off fails or commits later, breaking
// FIFO (TestFIFOHistory catches it). The caller calls done when its release
// is over.
//
// ops are the release's own writes. A hand-off that would make the release
// txn count more than etcd's default --max-txn-ops (with the compares that
// prove the waiters it passes over still barred, passover.go), or as many
// operations as one etcd refused before (refusedHandoff), is not planned:
// the release goes alone; so does any release on a pool whose hand-off
// etcd refused, and not the release alone, for another lasting reason in
// the last deniedHandoffFor (deniedHandoff).
func (c *Coordinator) handoff(h heldSeat, ops []clientv3.Op) (next *claimPlan, done func()) {
	sh := c.shared(h.pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.handing || sh.handoffDeniedNow(time.Now()) {
		return nil, func() {}
	}
	p := sh.st.planHandoff(h)
	if p == nil || !c.fitsHandoff(h, ops, p) {
		return nil, func() {}
	}
	sh.handing = true
	return p, func() {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		sh.handing = false
	}
}

// fitsHandoff reports whether the release txn of h with ops and the
// hand-off p counts at most etcd's default --max-txn-ops (a hand-off past
// waiters whose bars it proves can count more, passover.go), and fewer
// operations than the smallest such txn etcd has refused as too many.
func (c *Coordinator) fitsHandoff(h heldSeat, ops []clientv3.Op, p *claimPlan) bool {
	n := txnCount(c.releaseTxn(h, ops, p))
	refused := c.handoffOps.Load()
	return n <= maxTxnOps && (refused == 0 || n < int(refused))
}

// deniedHandoffFor is how long the releases of a Coordinator on a pool go
// alone after etcd refused one's hand-off for good, for a reason other
// than too many operations, and then took the release alone
// (deniedHandoff): so the refusal was of what the hand-off added (a role
// that may release but not write the waiter's queue key, say). Long
// enough that such a role costs one refused txn a minute, not one per
// release; short enough that a role granted the permission later hands
// off again soon.
const deniedHandoffFor = time.Minute

// deniedHandoff records that etcd refused a hand-off on pool at now as
// above. No hand-off is planned on the pool for deniedHandoffFor.
func (c *Coordinator) deniedHandoff(pool string, now time.Time) {
	sh := c.shared(pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.handoffDenied = now
}

// handoffDeniedNow reports whether, at now, a hand-off on the pool is
// within deniedHandoffFor of the last denial. Under sh.mu.
func (sh *sharedState) handoffDeniedNow(now time.Time) bool {
	return !sh.handoffDenied.IsZero() && now.Sub(sh.handoffDenied) < deniedHandoffFor
}

// refusedHandoff records that etcd refused, as too many operations, a
// release txn with a hand-off that counted n, and reports whether that
// lowered the count from which hand-offs are not tried. etcd does not say
// its --max-txn-ops, but any txn counting as many is refused too; so
// on such an etcd only the first release of each shape pays for a refused
// txn (TestRefusedHandoffReleasesAlone).
func (c *Coordinator) refusedHandoff(n int) bool { return lowerTo(&c.handoffOps, int64(n)) }

// planHandoff plans, on s, the grant of the seat h frees to the first
// waiter that may take it, or returns nil.
//
// It returns nil, too, when that waiter may take a seat that is free
// already: the head claims it (queue.go), and a hand-off to the head
// would race that claim, the loser's txn failing as a whole. With 64
// contenders on 16 seats spread over 8 processes, the head's claims failed
// about half the time on that race; the worst round was 0.46–0.48 of raw
// etcd before this rule and 0.54 with it (BenchmarkContention
// processes=8).
func (s *poolState) planHandoff(h heldSeat) *claimPlan {
	if s.rev == 0 || s.probed || len(s.queue) == 0 {
		return nil // a probe shows neither the waiters' records nor their slots
	}
	var passed passedOver
	for _, kv := range s.line { // in arrival order; nothing below changes the queue
		req, ok := s.waiterRequest(kv)
		if !ok || queueName(req.lease, req.nonce) == h.claim {
			// Not a waiter; or the releaser's own queue key, which a view
			// that missed its grant still shows: granting it would put the
			// very keys the release deletes, a txn etcd refuses.
			continue
		}
		if s.heldSeats() < s.spec.Capacity { // else no seat is free: no plan to try
			if _, err := s.plan(req); err == nil {
				return nil // a seat is free for it already, which the head claims
			}
		}
		restore := s.vacate(h)
		p, err := s.plan(req)
		if err == nil {
			p.cmps = append(p.cmps, passed.cmps(s)...) // on s as the release leaves it (passover.go)
		}
		restore()
		if ownLimit(err) {
			passed.pass(req.opts, err) // as in planBatch: FIFO among waiters that can be served
			continue
		}
		if err != nil {
			return nil
		}
		return p
	}
	return nil
}

// vacate removes h's keys from s, as the release txn will, and marks their
// slots as freed by h's token for takeSlot. The returned func undoes both:
// until the release commits, its keys must stay counted (see forgetIn).
func (s *poolState) vacate(h heldSeat) (restore func()) {
	var gone []*mvccpb.KeyValue
	s.freed = map[string]int64{}
	for _, key := range h.slotKeys(s.k) {
		prefix := slotOf(key)
		s.freed[prefix] = h.token
		if s.holders[prefix] != h.claim {
			continue
		}
		kv := &mvccpb.KeyValue{Key: []byte(key), CreateRevision: h.token, ModRevision: h.token, Version: 1, Lease: int64(h.lease)}
		if seat := s.seats[h.seat]; seat != nil && string(seat.Key) == key {
			kv = seat
		}
		s.del(key)
		gone = append(gone, kv)
	}
	return func() {
		for _, kv := range gone {
			s.put(kv)
		}
		s.freed = nil
	}
}

// released updates this process's view after cl's release committed: its
// keys are gone. The next holder's keys, if the release handed the seat
// to next, are not written into the view: while a pool feed runs, the view
// is also what waiters read their grants from, and a grant written ahead of
// the feed could meet an older event of the same slot and read as a lost
// seat. The feed brings them.
func (c *Coordinator) released(cl *Claim, next *claimPlan) {
	sh := c.shared(cl.pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	forgetIn(sh.st, cl)
	c.log.Debug("seat released", "pool", cl.pool, "seat", cl.seat, "token", cl.token, "handed_off", next != nil)
}
