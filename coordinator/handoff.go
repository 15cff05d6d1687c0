package coordinator

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Hand-off on release. When a holder releases while others wait, its
// release transaction grants the freed seat to the first waiter that may
// take it, in a nested txn built like a grant by the head (grant.go): it
// re-checks that waiter's queue key, fence and slots, writes the waiter's
// seat and slot keys under the waiter's lease and deletes its queue key.
// The waiter wakes on that delete and finds the seat by its name. So a
// seat passes from holder to waiter in one transaction, instead of a
// release, a watch event and the waiter's own claim txn.
//
// The seat and slots the release frees are reused in the same txn. That is
// possible because each holder's keys are named after its claim (keys.go):
// the release deletes <slot>/<releaser> and the grant creates
// <slot>/<waiter>. The grant's compare on such a slot is that the only key
// under its prefix is the releaser's, by its token (takeSlot), which the
// outer compare of the release proves; so the slot never holds two keys.
//
// The releaser plans the hand-off from this process's view of the pool:
// the shared state, which the pool feed keeps exact while this process has
// waiters on the pool, and which a claim that read the whole pool last
// (rather than a probe, probe.go). A stale view costs only the hand-off:
// when the nested compares fail, the release applies alone and the head
// waiter claims the seat itself as before. What it does not do: a process
// that has no waiters of its own on the pool, and so only probes, does not
// hand off.

// handoff plans the grant of the seat h frees to the first waiter in this
// process's view that may take it. It returns the waiter's plan and the
// nested txn to append to the release, or a nil plan.
//
// One release of a process hands off at a time; releases made meanwhile
// only free their seats, which the head then claims, several in one txn
// (grant.go). Aiming them at the same first waiter would make all but one
// fail; aiming them at the next waiters would grant those while the first
// still waits whenever the first hand-off fails or commits later, breaking
// FIFO (TestFIFOHistory catches it). The caller calls done when its release
// is over.
func (c *Coordinator) handoff(h heldSeat) (*claimPlan, clientv3.Op, func()) {
	sh := c.shared(h.pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.handing {
		return nil, clientv3.Op{}, func() {}
	}
	p, op := sh.st.planHandoff(h)
	if p == nil {
		return nil, clientv3.Op{}, func() {}
	}
	sh.handing = true
	return p, op, func() {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		sh.handing = false
	}
}

// planHandoff plans, on s, the nested grant of the seat h frees to the
// first waiter that may take it, or returns a nil plan.
func (s *poolState) planHandoff(h heldSeat) (*claimPlan, clientv3.Op) {
	if s.rev == 0 || s.probed || len(s.queue) == 0 {
		return nil, clientv3.Op{} // a probe shows neither the waiters' records nor their slots
	}
	restore := s.vacate(h)
	defer restore()
	for _, kv := range s.waiters() {
		req, ok := s.waiterRequest(kv)
		if !ok || queueName(req.lease, req.nonce) == h.claim {
			// Not a waiter; or the releaser's own queue key, which a view
			// that missed its grant still shows: granting it would put the
			// very keys the release deletes, a txn etcd refuses.
			continue
		}
		p, err := s.plan(req)
		if ownLimit(err) {
			continue // as in planBatch: FIFO among waiters that can be served
		}
		if err != nil {
			return nil, clientv3.Op{}
		}
		return p, clientv3.OpTxn(p.cmps, p.ops, nil)
	}
	return nil, clientv3.Op{}
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
// keys are gone. The next holder's keys, if the hand-off applied, are not
// written into the view: while a pool feed runs, the view is also what
// waiters read their grants from, and a grant written ahead of the feed
// could meet an older event of the same slot and read as a lost seat. The
// feed brings them.
func (c *Coordinator) released(cl *Claim, next *claimPlan, resp *clientv3.TxnResponse) {
	sh := c.shared(cl.pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	forgetIn(sh.st, cl)
	handed := next != nil && resp.Succeeded && lastTxnSucceeded(resp)
	c.log.Debug("seat released", "pool", cl.pool, "seat", cl.seat, "token", cl.token, "handed_off", handed)
}

// lastTxnSucceeded reports whether the nested txn that ends a committed
// transaction's ops took its Then branch.
func lastTxnSucceeded(resp *clientv3.TxnResponse) bool {
	n := len(resp.Responses)
	return n > 0 && resp.Responses[n-1].GetResponseTxn().GetSucceeded()
}
