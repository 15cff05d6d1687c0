package coordinator

import (
	"errors"
	"maps"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Passing over, proven. A head's batch (grant.go) and a release's hand-off
// (handoff.go) grant seats in line order, passing over a waiter that its
// own constraints bar. They plan on this process's view, which is one
// round trip behind etcd at best: a waiter passed over because its tenant
// was at its limit may have become servable (the tenant's seat released)
// before the txn applies. Granting a waiter behind it then overtakes a
// waiter that could be served, which strict FIFO among waiters that can be
// served forbids (TestPassedOverWaiterNotOvertaken).
//
// So a grant that follows a waiter passed over at its tenant's limit
// carries, as compares, that as many of the slots the tenant held in the
// view as its limit are still held (by any key: a slot handed on is still
// held). If one was released meanwhile, the grant does not apply, nor any
// behind it in the chain; the head's own claim, ahead of them all, still
// does. In a hand-off the compares join the release's, so the release
// fails as a whole and is sent again alone (Claim.release). Either way the
// waiters are planned again on a view that shows the freed slot.
//
// A waiter passed over for its instance selector (every instance it
// selects is full or not ready, or the instance it names is not
// registered) is proven likewise: no instance was registered or changed
// since the view (one range compare on the instances' mod revisions), and
// each instance it selects still has as many seats held as it has seats.
//
// A proof compares as many held slots as the bar needs (the tenant's
// limit, the instance's seats), not every slot held, so that a tenant held
// above a limit that shrank costs no more; the release of a slot it did
// not pick leaves the grant alone. Slots a grant earlier in the same batch
// takes are not compared: they are created by this very txn, if at all
// (etcd evaluates every compare before any write). A proof is built to at
// most maxTxnOps+1 compares a bar: a grant whose proof would take the
// chain past its limit on operations ends the batch, which is FIFO-safe
// (the next head grants it), and a hand-off that would count more than
// etcd's default --max-txn-ops is not planned (fitsHandoff).

// passedOver collects what bars the waiters a batch or a hand-off passed
// over, and how much of it the grants so far prove.
type passedOver struct {
	bars      []passBar
	proved    int             // bars[:proved] are proven by an earlier grant of the chain
	instances bool            // the instances' compare is in the chain already
	binds     map[string]bool // instances whose held seats are compared already
	plans     []*claimPlan    // the batch's own claim and grants, whose slots it takes
}

// passBar is what bars one waiter passed over: its tenant at its limit, or
// its instance selector.
type passBar struct {
	tenant string
	sel    *claimOptions // instance and labels; nil for a tenant
}

// pass records that the waiter with options o was passed over for err, a
// refusal by its own constraints (ownLimit). A tenant denied outright
// (limit 0) needs no proof: only a spec change, which every grant
// compares, lifts that.
func (po *passedOver) pass(o claimOptions, err error) {
	var ns *NoSeatError
	switch {
	case errors.As(err, &ns) && ns.Reason == WaitTenantLimit:
		if !slices.ContainsFunc(po.bars, func(b passBar) bool { return b.sel == nil && b.tenant == o.tenant }) {
			po.bars = append(po.bars, passBar{tenant: o.tenant})
		}
	case errors.As(err, &ns) && ns.Reason == WaitNoMatchingInstance, errors.Is(err, ErrInstanceNotFound):
		if !slices.ContainsFunc(po.bars, func(b passBar) bool {
			return b.sel != nil && b.sel.instance == o.instance && maps.Equal(b.sel.labels, o.labels)
		}) {
			po.bars = append(po.bars, passBar{sel: &claimOptions{instance: o.instance, labels: o.labels}})
		}
	}
}

// took records that the batch takes the slots of plan p (poolState.assume).
// It costs the batch an append: the slots are looked at only when a proof
// is built (takenSlots).
func (po *passedOver) took(p *claimPlan) { po.plans = append(po.plans, p) }

// takenSlots returns the slot prefixes the batch's own plans take.
func (po *passedOver) takenSlots() map[string]bool {
	taken := map[string]bool{}
	for _, p := range po.plans {
		for _, op := range p.ops {
			if op.IsPut() {
				taken[slotOf(string(op.KeyBytes()))] = true
			}
		}
	}
	return taken
}

// cmps returns the compares that prove, on the server, that what barred
// the waiters passed over since the last call still bars them, as s shows
// it. The grant they join applies only if they hold; so do those nested in
// it, which need no proof of their own.
func (po *passedOver) cmps(s *poolState) []clientv3.Cmp {
	if po.proved == len(po.bars) {
		return nil // nothing passed over since: the common case, at no cost
	}
	var cmps []clientv3.Cmp
	taken := po.takenSlots()
	for _, b := range po.bars[po.proved:] {
		if b.sel == nil {
			limit, _ := s.spec.LimitFor(b.tenant)
			cmps = append(cmps, heldCmps(s.k.tenants(s.pool, b.tenant), s.tenants[b.tenant], limit, taken)...)
			continue
		}
		if !po.instances {
			po.instances = true
			prefix := s.k.instances(s.pool)
			cmps = append(cmps, revCmp(clientv3.ModRevision(prefix), clientv3.GetPrefixRangeEnd(prefix), pb.Compare_LESS, s.rev+1))
		}
		for _, id := range sortedKeys(s.instances) {
			in := s.instances[id]
			if po.binds[id] || b.sel.instance != "" && id != b.sel.instance || !in.Matches(b.sel.labels) {
				continue
			}
			if po.binds == nil {
				po.binds = map[string]bool{}
			}
			po.binds[id] = true
			if in.State == InstanceReady { // else its state bars it, which the instances' compare proves
				cmps = append(cmps, heldCmps(s.k.binds(s.pool, id), s.binds[id], in.Seats, taken)...)
			}
		}
	}
	return cmps
}

// stepOut returns, for err, a head's refused plan on s, the step-out it
// sends when its own constraints bar it (ownLimit), with their proof
// (barProof) and s's revision; nil for any other refusal. A head in a
// full pool looks at every change of it: nothing is built for those.
func (s *poolState) stepOut(o claimOptions, err error) *stepOutError {
	if !ownLimit(err) {
		return nil
	}
	return &stepOutError{proof: s.barProof(o, err), rev: s.rev}
}

// barProof returns the compares that prove, on the server, that err, the
// refusal of a head with options o by its own constraints (ownLimit),
// still holds as s shows it: what its step-out carries (stepOut). They
// are a pass-over's proof of that bar, and the spec's mod revision, which
// sets the limits. A proof that would not fit a txn with the step-out's
// own compare (a tenant limit over maxTxnOps-2) is nil: such a step-out
// is not proven.
func (s *poolState) barProof(o claimOptions, err error) []clientv3.Cmp {
	if s.specKV == nil {
		return nil
	}
	var po passedOver
	po.pass(o, err)
	cmps := append(po.cmps(s), revCmp(clientv3.ModRevision(s.k.spec(s.pool)), "", pb.Compare_EQUAL, s.specKV.ModRevision))
	if len(cmps)+1 > maxTxnOps { // with the step-out's own compare
		return nil
	}
	return cmps
}

// heldCmps compares that need of the slots of the set under prefix that s
// shows held (slot -> create revision) are still held, by any key; slots
// the batch itself takes count without a compare. It builds at most
// maxTxnOps+1 compares, more than any txn takes.
func heldCmps(prefix string, held map[int]int64, need int, taken map[string]bool) []clientv3.Cmp {
	slots := make([]int, 0, min(len(held), maxTxnOps+1))
	for n := range held {
		switch {
		case taken[slotPrefix(prefix, n)]:
			need--
		case len(slots) <= maxTxnOps:
			slots = append(slots, n)
		}
	}
	slices.Sort(slots)
	var cmps []clientv3.Cmp
	for _, n := range slots[:max(0, min(need, len(slots)))] {
		slot := slotPrefix(prefix, n)
		cmps = append(cmps, revCmp(clientv3.CreateRevision(slot), clientv3.GetPrefixRangeEnd(slot), pb.Compare_GREATER, 0))
	}
	return cmps
}

// proven marks everything passed over so far as proven by the grant that
// took the compares cmps returned.
func (po *passedOver) proven() { po.proved = len(po.bars) }
