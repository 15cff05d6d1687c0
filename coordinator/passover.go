package coordinator

import (
	"errors"
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
// carries, as compares, that every slot the tenant held in the view is
// still held, each by the same key (its create revision). If one was
// released meanwhile, the grant does not apply, nor any behind it in the
// chain; the head's own claim, ahead of them all, still does. In a
// hand-off the compares join the release's, so the release fails as a
// whole and is sent again alone (Claim.release). Either way the waiters
// are planned again on a view that shows the freed slot.
//
// What is not proven: a waiter passed over for its instance selector. To
// prove that no instance it selects has freed a seat would take a compare
// per seat of every such instance. Such a waiter may be overtaken, within
// that round trip, by a waiter behind it that any instance serves.

// passedOver collects the tenants at their limit whose waiters a batch or
// a hand-off passed over, and which of them the grants so far prove.
type passedOver struct {
	tenants []string
	proved  int // tenants[:proved] are proven by an earlier grant of the chain
}

// pass records that the waiter with options o was passed over for err, a
// refusal by its own constraints (ownLimit).
func (po *passedOver) pass(o claimOptions, err error) {
	var ns *NoSeatError
	if errors.As(err, &ns) && ns.Reason == WaitTenantLimit && !slices.Contains(po.tenants, o.tenant) {
		po.tenants = append(po.tenants, o.tenant)
	}
}

// cmps returns the compares that prove, on the server, that the tenants
// passed over since the last call still hold every slot they held in s.
// The grant they join applies only if they hold; so do those nested in
// it, which need no proof of their own. A slot taken by a grant earlier in
// the same batch (assume: created after s.rev) is not compared: it is
// created by this very txn, if at all.
func (po *passedOver) cmps(s *poolState) []clientv3.Cmp {
	var cmps []clientv3.Cmp
	for _, t := range po.tenants[po.proved:] {
		held := s.tenants[t]
		slots := make([]int, 0, len(held))
		for n, rev := range held {
			if rev <= s.rev {
				slots = append(slots, n)
			}
		}
		slices.Sort(slots)
		for _, n := range slots {
			prefix := slotPrefix(s.k.tenants(s.pool, t), n)
			cmps = append(cmps, revCmp(clientv3.CreateRevision(prefix), clientv3.GetPrefixRangeEnd(prefix), pb.Compare_EQUAL, held[n]))
		}
	}
	return cmps
}

// proven marks every tenant passed over so far as proven by the grant that
// took the compares cmps returned.
func (po *passedOver) proven() { po.proved = len(po.tenants) }
