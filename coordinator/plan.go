package coordinator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// claimRequest is everything a plan needs besides the pool's state.
type claimRequest struct {
	opts     claimOptions
	lease    clientv3.LeaseID
	nonce    uint64
	queueKey string // set for a queued waiter
	queueRev int64  // its create revision
	// granted marks a plan the head of the queue or a release makes for a
	// waiter (see grant.go): it does not check that nobody is ahead, since
	// the planner does, and plans in order.
	granted bool
	// busy counts, per seat, this process's claim txns in flight that
	// chose it (sharedState.aiming): set for a claim planned on the shared
	// state, read under its lock; nil for the others.
	busy map[int]int
	// spoiled, shared by the copies of one Claim call's request, is set
	// where keys of its name may be left behind: the name is then not
	// reused (names.go). Nil for requests rebuilt from others' keys.
	spoiled *atomic.Bool
}

// spoil marks the request's name as not reusable (names.go).
func (r claimRequest) spoil() {
	if r.spoiled != nil {
		r.spoiled.Store(true)
	}
}

// claimPlan is one claim transaction: compares and writes that together take
// a seat, and the slots it chose.
type claimPlan struct {
	lease clientv3.LeaseID
	claim string // the claim's <lease>-<nonce>, the last segment of its keys
	rec   seatRecord
	seat  int
	inst  *Instance
	cmps  []clientv3.Cmp
	ops   []clientv3.Op
	// grants are the nested txns by which the head grants seats to the
	// waiters behind it in the same transaction (see grant.go).
	grants []clientv3.Op
	// chainOps is what the txn counts against etcd's --max-txn-ops along
	// that chain (grantBehind); 0 before grants are planned.
	chainOps int
	// aimed says the plan's seat is counted in sharedState.aiming until
	// its txn returns.
	aimed bool
	// probe says the txn's Else branch reads a probe for the claimant
	// (probe.go) rather than the whole pool.
	probe bool
}

// errSeatsBusy tells a claimant that may wait that every free seat it sees
// is being claimed by another claim txn of this process in flight: it
// queues rather than send a txn that would collide with one of them.
var errSeatsBusy = errors.New("coordinator: every free seat is being claimed in this process")

// errNotHead is returned to a queued waiter that is not first in line.
var errNotHead = errors.New("coordinator: not first in queue")

// plan builds the claim transaction for req, or says why there is no seat.
// It reads only s; the compares it emits re-check on the server every fact
// it relied on:
//
//   - the spec's mod revision (capacity, tenant limits, mode);
//   - the queue: empty for a fresh claim, nobody ahead for a waiter, and the
//     waiter's own key still there (etcd#19597);
//   - the claimant's fence key (see ambiguous.go);
//   - for each limited set (pool seats, tenant slots, instance slots), that
//     the chosen slot is free and that no more than limit-1 others are held
//     (see takeSlot).
func (s *poolState) plan(req claimRequest) (*claimPlan, error) {
	if s.specKV == nil {
		return nil, fmt.Errorf("%w: %q", ErrPoolNotFound, s.pool)
	}
	if s.specErr != nil {
		return nil, s.specErr
	}
	for key := range s.foreign {
		if _, err := s.k.parse(key); errors.Is(err, errOldSchema) {
			old, _ := errors.AsType[*InvalidError](err)
			return nil, fmt.Errorf("%w: %q under pool %q is a %s, written by an older etcdpool that still uses the pool; "+
				"it goes with that process's lease, or `poolctl doctor %s --fix` deletes it", ErrForeignKey, key, s.pool, old.Reason, s.pool)
		}
		return nil, fmt.Errorf("%w: %q under pool %q; delete it", ErrForeignKey, key, s.pool)
	}
	if len(s.unadmitted) > maxUnleased {
		return nil, fmt.Errorf("%w: %d keys under pool %q's instances that are not instances (such as %q); fix or delete them",
			ErrForeignKey, len(s.unadmitted), s.pool, sortedKeys(s.unadmitted)[0])
	}
	if len(s.unleased) > maxUnleased {
		return nil, fmt.Errorf("%w: %d queue keys without a lease under pool %q (such as %q); run `poolctl doctor %s --fix`",
			ErrForeignKey, len(s.unleased), s.pool, sortedKeys(s.unleased)[0], s.pool)
	}
	if err := s.denied(req.opts); err != nil {
		return nil, err // never grantable: said first, whatever else is in the way (waiting.go)
	}
	p := &claimPlan{lease: req.lease, claim: queueName(req.lease, req.nonce), rec: seatRecord{
		Holder: req.opts.holder, Tenant: req.opts.tenant, Nonce: req.nonce,
		ClaimedAt: time.Now().UTC(), TenantSlot: -1, BindSlot: -1,
	}}
	p.cmps = append(p.cmps,
		revCmp(clientv3.ModRevision(s.k.spec(s.pool)), "", pb.Compare_EQUAL, s.specKV.ModRevision),
		revCmp(clientv3.ModRevision(s.k.fence(s.pool, req.lease)), "", pb.Compare_EQUAL, s.fences[req.lease]))
	if err := s.planQueue(p, req); err != nil {
		return nil, err
	}
	seats := s.seatSet()
	seats.busy = req.busy
	seat, cmps, err := s.takeSlot(seats)
	if err == nil && req.busy[seat] > 0 && req.opts.wait {
		return nil, errSeatsBusy
	}
	if errors.Is(err, errSetFull) {
		return nil, &NoSeatError{Pool: s.pool, Reason: WaitPoolFull,
			Detail: fmt.Sprintf("pool %q holds %d of %d", s.pool, s.heldSeats(), s.spec.Capacity)}
	}
	if err != nil {
		return nil, err
	}
	p.seat, p.cmps = seat, append(p.cmps, cmps...)
	if err := s.planTenant(p, req); err != nil {
		return nil, err
	}
	if err := s.planInstance(p, req); err != nil {
		return nil, err
	}
	p.ops = append(p.ops, clientv3.OpPut(s.k.seat(s.pool, seat, p.claim), string(p.rec.encode()), clientv3.WithLease(req.lease)))
	if req.queueKey != "" {
		p.ops = append(p.ops, clientv3.OpDelete(req.queueKey))
	}
	return p, nil
}

func (s *poolState) planQueue(p *claimPlan, req claimRequest) error {
	if req.queueKey == "" {
		if len(s.queue) > 0 {
			return &NoSeatError{Pool: s.pool, Reason: WaitQueue,
				Detail: fmt.Sprintf("pool %q has claimants waiting (%d)", s.pool, len(s.queue))}
		}
		p.cmps = append(p.cmps, s.queueCmps(func(string, string) bool { return true }, pb.Compare_EQUAL, 0)...)
		return nil
	}
	if _, ok := s.queue[req.queueKey]; !ok {
		return fmt.Errorf("%w: queue entry of lease %x is gone", ErrSessionExpired, req.lease)
	}
	if req.granted {
		p.cmps = append(p.cmps, revCmp(clientv3.CreateRevision(req.queueKey), "", pb.Compare_EQUAL, req.queueRev))
		return nil
	}
	if s.countAhead(req.queueRev) > 0 {
		return errNotHead
	}
	// On an empty range etcd compares a zero key, and 0 > rev-1 fails: so
	// only the ranges that hold waiters are compared (ours always does).
	p.cmps = append(p.cmps, revCmp(clientv3.CreateRevision(req.queueKey), "", pb.Compare_EQUAL, req.queueRev))
	p.cmps = append(p.cmps, s.queueCmps(s.holdsWaiters, pb.Compare_GREATER, req.queueRev-1)...)
	return nil
}

// revCmp is clientv3.Compare(target.WithRange(end), result, rev) for a
// create or mod revision target (no range when end is ""), built in place:
// clientv3.Compare and WithRange each copy the compare by reflection
// (proto.Clone), and a plan, on the path from a Release call to the next
// grant, makes several. TestRevCmp checks it against clientv3.Compare.
func revCmp(target clientv3.Cmp, end string, result pb.Compare_CompareResult, rev int64) clientv3.Cmp {
	c := target.GetCompare()
	if end != "" {
		c.RangeEnd = []byte(end)
	}
	c.Result = result
	switch c.Target {
	case pb.Compare_CREATE:
		c.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: rev}
	case pb.Compare_MOD:
		c.TargetUnion = &pb.Compare_ModRevision{ModRevision: rev}
	default:
		panic("coordinator: revCmp of a target other than a revision")
	}
	return target
}

// noInstanceCmps compares that the pool still has no instance a claim
// could bind: nothing under instances/ but the keys s holds unadmitted,
// each unchanged (one that becomes an instance changes). So a key that is
// not an instance (an unknown state a newer agent wrote, say) neither
// binds seats nor fails every anonymous claim
// (TestUnadmittedInstanceKeyLeavesSeatsAnonymous). One compare per range
// between such keys and one per key; plan refuses past maxUnleased keys.
func (s *poolState) noInstanceCmps() []clientv3.Cmp {
	prefix := s.k.instances(s.pool)
	bad := sortedKeys(s.unadmitted)
	var cmps []clientv3.Cmp
	from := prefix
	for _, to := range append(bad, clientv3.GetPrefixRangeEnd(prefix)) {
		if from < to {
			cmps = append(cmps, revCmp(clientv3.CreateRevision(from), to, pb.Compare_EQUAL, 0))
		}
		from = to + "\x00"
	}
	for _, k := range bad {
		cmps = append(cmps, revCmp(clientv3.ModRevision(k), "", pb.Compare_EQUAL, s.unadmitted[k]))
	}
	return cmps
}

// maxUnleased bounds the unleased queue keys claims compare around: each
// costs a compare, and a txn holds at most 128 (etcd's --max-txn-ops).
const maxUnleased = 32

// queueCmps compares the queue prefix, skipping unleased keys: one compare
// per range between them, for the ranges keep selects.
func (s *poolState) queueCmps(keep func(from, to string) bool, op pb.Compare_CompareResult, v int64) []clientv3.Cmp {
	q := s.k.queue(s.pool)
	var cmps []clientv3.Cmp
	from := q
	for _, bad := range append(sortedKeys(s.unleased), clientv3.GetPrefixRangeEnd(q)) {
		if from < bad && keep(from, bad) {
			cmps = append(cmps, revCmp(clientv3.CreateRevision(from), bad, op, v))
		}
		from = bad + "\x00"
	}
	return cmps
}

// holdsWaiters reports whether the snapshot has a waiter in [from, to).
func (s *poolState) holdsWaiters(from, to string) bool {
	for k := range s.queue {
		if from <= k && k < to {
			return true
		}
	}
	return false
}

func (s *poolState) planTenant(p *claimPlan, req claimRequest) error {
	t := req.opts.tenant
	limit, limited := s.spec.LimitFor(t)
	if !limited {
		return nil
	}
	n, cmps, err := s.takeSlot(wholeSet(s.k.tenants(s.pool, t), limit, s.tenants[t]))
	if err != nil {
		return &NoSeatError{Pool: s.pool, Reason: WaitTenantLimit,
			Detail: fmt.Sprintf("tenant %q holds %d of its limit %d", t, len(s.tenants[t]), limit)}
	}
	p.rec.TenantSlot = n
	p.cmps = append(p.cmps, cmps...)
	p.ops = append(p.ops, clientv3.OpPut(s.k.tenant(s.pool, t, n, p.claim), slot(p.seat), clientv3.WithLease(req.lease)))
	return nil
}

func (s *poolState) planInstance(p *claimPlan, req claimRequest) error {
	o := req.opts
	if !s.bound() && o.instance == "" && len(o.labels) == 0 {
		// An anonymous seat, in a pool that has no instance as s shows it.
		// Once one registers, the pool binds every seat: the compares that
		// it still has none fail a claim planned on a view from before, and
		// its Else read plans it again (TestAnonSeatNotAfterInstanceJoins).
		// Without them, a process whose claims never failed kept granting
		// unbound seats.
		p.cmps = append(p.cmps, s.noInstanceCmps()...)
		return nil
	}
	if o.instance != "" {
		if _, ok := s.instances[o.instance]; !ok {
			// The claimant's own limit (see ownLimit): a head waiter pinned
			// to a vanished instance steps out instead of blocking the line.
			return fmt.Errorf("%w: %q in pool %q", ErrInstanceNotFound, o.instance, s.pool)
		}
	}
	var best *Instance
	var bestCmps []clientv3.Cmp
	bestSlot, bestLoad := -1, 0
	for _, id := range sortedKeys(s.instances) {
		in := s.instances[id]
		if !s.fits(id, in, o) {
			continue
		}
		n, cmps, err := s.takeSlot(wholeSet(s.k.binds(s.pool, id), in.Seats, s.binds[id]))
		// Spread load: prefer the least loaded instance, ties at random.
		load := len(s.binds[id])
		if err == nil && (best == nil || load < bestLoad || (load == bestLoad && rand.IntN(2) == 0)) {
			best, bestCmps, bestSlot, bestLoad = &in, cmps, n, load
		}
	}
	if best == nil {
		if s.selectorBars() {
			return &NoSeatError{Pool: s.pool, Reason: WaitNoMatchingInstance,
				Detail: fmt.Sprintf("no ready instance with a free seat matches in pool %q", s.pool)}
		}
		return &NoSeatError{Pool: s.pool, Reason: WaitInstancesFull,
			Detail: fmt.Sprintf("no ready instance has a free seat in pool %q", s.pool)}
	}
	p.inst, p.rec.Instance, p.rec.BindSlot = best, best.ID, bestSlot
	p.cmps = append(p.cmps, bestCmps...)
	p.cmps = append(p.cmps, revCmp(clientv3.ModRevision(s.k.instance(s.pool, best.ID)), "", pb.Compare_EQUAL, best.Revision))
	p.ops = append(p.ops, clientv3.OpPut(s.k.bind(s.pool, best.ID, bestSlot, p.claim), slot(p.seat), clientv3.WithLease(req.lease)))
	return nil
}

// fits is the one rule for which instances a claim may bind to now: ready,
// selected by the claim's instance and labels, with a free seat.
func (s *poolState) fits(id string, in Instance, o claimOptions) bool {
	return in.State == InstanceReady && (o.instance == "" || id == o.instance) &&
		in.Matches(o.labels) && len(s.binds[id]) < in.Seats
}

// selectorBars reports whether, when no instance that a claim selects has
// a free seat, its own selector is what bars it (no_matching_instance): a
// claim without one could take a seat now, on a free instance, or
// anonymous in a pool that binds none (its instances gone). Else every
// instance is full, for every claim alike (instances_full).
func (s *poolState) selectorBars() bool { return !s.bound() || s.anyFits(claimOptions{}) }

// anyFits reports whether some instance fits a claim with options o.
func (s *poolState) anyFits(o claimOptions) bool {
	for id, in := range s.instances {
		if s.fits(id, in, o) {
			return true
		}
	}
	return false
}

// ownFits reports whether the claimant's own constraints (tenant limit,
// instance selector) would let it take a seat now, ignoring the queue and
// what bars every claim alike (ownRoom).
func (s *poolState) ownFits(o claimOptions) bool { return s.ownRoom(o, 1) > 0 }

// ownRoom returns how many more claims with options o their own
// constraints admit now, ignoring the queue and what bars every claim
// alike, counted up to need: the free slots of o's tenant, and, for a
// claim with an instance selector, the free seats of the instances it
// selects. It stops looking at instances once it has counted need. A spec
// it cannot read admits any (the claim path reports it).
//
// For a claim without a selector, full instances bar every claim alike,
// like the pool's capacity: they are not its own, and it waits in line,
// keeping its place (TestFullInstancesKeepArrivalOrder). A claim with a
// selector is held back until an instance it selects has a free seat,
// even while every instance is full: in line, it would step out at the
// head each time an instance it does not select freed a seat, one txn and
// one round trip per such waiter while that seat sat idle, and rejoin at
// the back once the instances were full again.
func (s *poolState) ownRoom(o claimOptions, need int) int {
	if s.specKV == nil || s.specErr != nil {
		return need
	}
	room := need
	if limit, limited := s.spec.LimitFor(o.tenant); limited {
		room = min(room, max(0, limit-len(s.tenants[o.tenant])))
	}
	if room == 0 || o.instance == "" && len(o.labels) == 0 {
		return room
	}
	free := 0
	for id, in := range s.instances {
		if free >= room {
			break
		}
		if s.fits(id, in, o) {
			free += in.Seats - len(s.binds[id])
		}
	}
	return min(room, free)
}

// constrained reports whether a claim has constraints of its own.
func (o claimOptions) constrained() bool {
	return o.tenant != "" || o.instance != "" || len(o.labels) > 0
}

// anyAtOrAbove reports whether a slot at or above limit is held. It is for
// the small per-tenant and per-instance sets; the pool's seats keep a count
// (poolState.seatsAbove) so that planning does not scan every held seat.
func anyAtOrAbove(held map[int]int64, limit int) bool {
	for n := range held {
		if n >= limit {
			return true
		}
	}
	return false
}

// slotSet is one limited set of slots (the pool's seats, a tenant's
// slots, an instance's slots) as a state knows it.
type slotSet struct {
	prefix string        // the set's key prefix
	limit  int           // at most this many held
	held   map[int]int64 // the held slots the state saw -> create revision
	count  int           // held slots in all, seen or not
	from   int           // every held slot at or above this one is in held
	high   bool          // a slot at or above limit is held
	busy   map[int]int   // claim txns in flight per slot (claimRequest.busy)
}

// wholeSet is a set the state saw whole.
func wholeSet(prefix string, limit int, held map[int]int64) slotSet {
	return slotSet{prefix: prefix, limit: limit, held: held, count: len(held), high: anyAtOrAbove(held, limit)}
}

// seatSet is the pool's seats: counted, and seen whole or from a slot up
// (a probe, probe.go).
func (s *poolState) seatSet() slotSet {
	return slotSet{prefix: s.k.seats(s.pool), limit: s.spec.Capacity, held: s.seatRevs,
		count: s.heldSeats(), from: s.seatsFrom, high: s.seatsAbove > 0}
}

var (
	// errSetFull says a slot set holds its limit.
	errSetFull = errors.New("coordinator: every slot held")
	// errNeedWhole says a probed state shows no free slot although the
	// set has one: the claim must read the whole pool to find it.
	errNeedWhole = errors.New("coordinator: no free slot among those probed")
)

// takeSlot picks a free slot in [0, limit) of set and returns the compares
// that make taking it safe:
//
//   - nothing is held under the slot's prefix (CreateRevision 0 over the
//     range); or, for a slot the same txn frees (a hand-off, s.freed), only
//     the releasing claim's key, by its token;
//   - fast path, when nothing at or above limit is held: no key exists in
//     [slot(limit), end of set). Then every held slot is below limit and
//     holds one key, so at most limit are held after the put, whatever else
//     happened since the state was read;
//   - slow path, after limit shrank below a held slot: every key under the
//     set has CreateRevision <= rev. Keys only appear by creation, so the
//     set held now is a subset of the set held at rev, which had
//     set.count < limit keys.
//
// It fails with errSetFull, or errNeedWhole when the free slots are among
// those a probe did not show.
func (s *poolState) takeSlot(set slotSet) (int, []clientv3.Cmp, error) {
	if set.count >= set.limit {
		return 0, nil, errSetFull
	}
	if set.high && s.rev == 0 {
		return 0, nil, errSetFull // the slow path needs a real snapshot
	}
	n, ok := freeSlot(set)
	if !ok {
		return 0, nil, errNeedWhole
	}
	prefix := slotPrefix(set.prefix, n)
	cmps := []clientv3.Cmp{revCmp(clientv3.CreateRevision(prefix), clientv3.GetPrefixRangeEnd(prefix), pb.Compare_EQUAL, s.freed[prefix])}
	if set.high {
		cmps = append(cmps, revCmp(clientv3.CreateRevision(set.prefix), clientv3.GetPrefixRangeEnd(set.prefix), pb.Compare_LESS, s.rev+1))
	} else {
		cmps = append(cmps, revCmp(clientv3.CreateRevision(set.prefix+slot(set.limit)), clientv3.GetPrefixRangeEnd(set.prefix), pb.Compare_EQUAL, 0))
	}
	return n, cmps, nil
}

// slotSpread is how many free slots above the held count a claim chooses
// among.
const slotSpread = 16

// freeSlot returns a free slot in [0, limit) among those the state saw. It
// picks below count+slotSpread, so the slot numbers ever in use (and the
// release records keyed by them) stay within the peak number held plus
// slotSpread; and it picks at random in the top of that window first,
// where free slots gather, so that concurrent claimants working from the
// same state rarely collide. Claimants of this process never collide
// while a free slot is not busy: it picks a busy one only when every free
// slot is. The caller has checked that fewer than limit slots are held,
// so the window has a free slot; it is false only when that slot lies
// below set.from, where the state saw nothing.
func freeSlot(set slotSet) (int, bool) {
	if n, ok := pickSlot(set, func(n int) bool { return set.busy[n] == 0 }); ok {
		return n, true
	}
	return pickSlot(set, func(int) bool { return true })
}

// pickSlot is freeSlot among the free slots that also satisfy want.
func pickSlot(set slotSet, want func(int) bool) (int, bool) {
	window := min(set.limit, set.count+slotSpread)
	from := max(0, set.from)
	lo := max(window-slotSpread, from)
	if lo >= window {
		return 0, false
	}
	free := func(n int) bool { _, taken := set.held[n]; return !taken && want(n) }
	for i := range 16 {
		n := from + rand.IntN(window-from)
		if i < 8 {
			n = lo + rand.IntN(window-lo)
		}
		if free(n) {
			return n, true
		}
	}
	start := rand.IntN(window - from)
	for i := range window - from {
		if n := from + (start+i)%(window-from); free(n) {
			return n, true
		}
	}
	return 0, false
}
