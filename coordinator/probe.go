package coordinator

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The probe: what a claim reads. A claimant plans from this process's view
// of the pool (cache.go), and needs a fresh one only when it has none yet or
// when its claim txn failed. Unless a pool feed keeps the view whole and
// current (feed.go), it then reads a probe, in one request (the failed
// txn's Else branch, or a read-only txn): the ranges a claim of its own
// plans from, not the whole pool.
//
//   - the spec key and the claimant's own fence key;
//   - the first maxUnleased+1 queue keys: enough to tell that the queue is
//     empty and to compare around unleased keys (queueCmps), or that it is
//     not and the claimant must queue;
//   - the seats, keys only, highest slot first, at most probeSeats of them,
//     with the count of all: how many are held, whether any is at or above
//     the capacity, and the free slots among the highest, where freeSlot
//     looks first;
//   - the instances, and their slots (keys only), since a bound claim
//     chooses the least loaded instance;
//   - the claimant's tenant's slots (keys only).
//
// A first claim on a pool of 10,000 held seats thus brings back about 70
// keys, not every seat, slot and record with its value. The server still
// walks its in-memory index of the seats to count them.
//
// What a probe does not show, planning does not take as free: seats below
// the lowest one returned are counted but never chosen (when no seat above
// is free, the claimant reads the whole pool: errNeedWhole). The slots of
// other tenants are simply absent, so another claimant of this process
// may plan on them as free; its compares then fail and its own probe reads
// them. A probed view is never followed by watch events, and never batches
// grants or hands a seat off: those need the whole pool.

// probeSeats is how many held seats a probe returns, highest slot first.
const probeSeats = 64

// The positions of the ranges in a probe, as probeOps builds them.
const (
	probeSpec = iota
	probeFence
	probeQueue
	probeSeatsAt
	probeInstances
	probeBinds
	probeTenant // present only for a claim with a tenant
)

// probeOps returns the reads of a probe for a claim of req on pool.
func (k keys) probeOps(pool string, req claimRequest) []clientv3.Op {
	ops := []clientv3.Op{
		probeSpec:  clientv3.OpGet(k.spec(pool)),
		probeFence: clientv3.OpGet(k.fence(pool, req.lease)),
		// With values: a keys-only range leaves out the lease, which tells
		// a waiter's key from a stray one.
		probeQueue: clientv3.OpGet(k.queue(pool), clientv3.WithPrefix(), clientv3.WithLimit(maxUnleased+1)),
		probeSeatsAt: clientv3.OpGet(k.seats(pool), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(probeSeats)),
		probeInstances: clientv3.OpGet(k.instances(pool), clientv3.WithPrefix()),
		probeBinds:     clientv3.OpGet(k.pool(pool)+segBinds+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	}
	if req.opts.tenant != "" {
		ops = append(ops, clientv3.OpGet(k.tenants(pool, req.opts.tenant), clientv3.WithPrefix(), clientv3.WithKeysOnly()))
	}
	return ops
}

// loadProbe replaces the state with a probe read at rev by the claimant of
// lease (see probeOps); an older read than the one held is ignored.
//
// The fences of this process's other leases are kept: a probe reads only
// its claimant's, and without the others every claim of another session
// would fail once on its fence compare. A kept fence is a hint like any
// other (a compare checks it), and never a reason to refuse.
func (s *poolState) loadProbe(rev int64, resps []*pb.ResponseOp, lease clientv3.LeaseID) {
	if rev < s.rev || len(resps) < probeTenant {
		return
	}
	fences := s.fences
	s.reset()
	s.rev, s.probed = rev, true
	for l, f := range fences {
		if l != lease {
			s.fences[l] = f
		}
	}
	for _, r := range resps { // the spec first: seats are counted against it
		for _, kv := range r.GetResponseRange().GetKvs() {
			s.put(kv)
		}
	}
	seats := resps[probeSeatsAt].GetResponseRange()
	s.unseenSeats = int(seats.GetCount()) - len(seats.GetKvs())
	if seats.GetMore() {
		s.seatsFrom = s.spec.Capacity // none seen: choose nothing
		for _, kv := range seats.GetKvs() {
			if pk, err := s.k.parse(string(kv.Key)); err == nil && pk.Seg == segSeats {
				s.seatsFrom = min(s.seatsFrom, pk.Slot)
			}
		}
	}
}
