package coordinator

import (
	"maps"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// poolState is one pool's keys as read from etcd, parsed once per change.
//
// It is a snapshot at rev, updated by watch events (which keep it a snapshot
// at a later rev) or by a claimant's own writes (which do not move rev).
// Claim plans are built from it, and every fact a plan relies on is
// re-checked by the plan's compares, so a stale state costs a failed txn,
// never safety. The one rule that reads rev: every key present with a create
// revision <= rev is in the state, unless this process deleted it.
type poolState struct {
	k    keys
	pool string
	rev  int64 // 0: never loaded
	// probed marks a state loaded from a probe (probe.go), which holds only
	// part of the pool: what a claim of the claimant that read it needs.
	// The feed, batches and hand-offs plan only on whole states.
	probed bool

	specKV  *mvccpb.KeyValue
	spec    PoolSpec
	specErr error

	seats    map[int]*mvccpb.KeyValue
	seatRevs map[int]int64 // seat -> create revision, kept with seats
	// unseenSeats counts held seats that a probe counted but did not
	// return; each has a slot below seatsFrom. Both are 0 in a whole state.
	unseenSeats int
	seatsFrom   int // every held seat at or above this slot is in seats
	// seatsAbove counts held seats at or above the capacity (after a
	// shrink); kept on every change so that a plan is O(1) in held seats.
	seatsAbove int
	instances  map[string]Instance
	binds      map[string]map[int]int64 // instance -> slot -> create revision
	tenants    map[string]map[int]int64 // tenant -> slot -> create revision
	// holders maps each held slot's prefix to the claim holding it, so that
	// the delete of a claim's slot key never erases the next claim's key in
	// the same slot (a hand-off writes both in one revision).
	holders map[string]string
	// freed marks the slots that the txn being planned frees, by slot
	// prefix, with the releasing claim's token; nil but during a hand-off's
	// planning (see vacate in handoff.go).
	freed map[string]int64
	// claimed maps each seat key's claim to the seat: a waiter finds the
	// seat a head or a release granted it by its own name (grant.go).
	claimed map[string]int
	queue   map[string]*mvccpb.KeyValue
	line    []*mvccpb.KeyValue // the queue in arrival order (line.go)
	// unleased are keys under queue/ without a lease: no waiter of ours
	// writes one (it could never go away), so they are not waiters, and
	// claims compare around them (see queueCmps) instead of being blocked.
	unleased map[string]bool
	// unadmitted are keys under instances/ whose value is not an instance
	// etcdpool admits (it does not decode or validate): claims never bind
	// to one, and an anonymous seat's claim compares around them
	// (noInstanceCmps).
	unadmitted map[string]int64           // key -> mod revision
	fences     map[clientv3.LeaseID]int64 // lease -> mod revision
	foreign    map[string]bool            // keys under the pool that etcdpool did not write

	// waiting are the records of held-back waiters (waiting.go); planning
	// ignores them.
	waiting map[string]*mvccpb.KeyValue
}

func newPoolState(k keys, pool string) *poolState {
	s := &poolState{k: k, pool: pool}
	s.reset()
	return s
}

func (s *poolState) reset() {
	s.specKV, s.spec, s.specErr = nil, PoolSpec{}, nil
	s.probed, s.unseenSeats, s.seatsFrom = false, 0, 0
	s.seats = map[int]*mvccpb.KeyValue{}
	s.seatRevs = map[int]int64{}
	s.seatsAbove = 0
	s.instances = map[string]Instance{}
	s.binds = map[string]map[int]int64{}
	s.tenants = map[string]map[int]int64{}
	s.holders = map[string]string{}
	s.claimed = map[string]int{}
	s.queue, s.line = map[string]*mvccpb.KeyValue{}, nil
	s.unleased = map[string]bool{}
	s.unadmitted = map[string]int64{}
	s.fences = map[clientv3.LeaseID]int64{}
	s.foreign = map[string]bool{}
	s.waiting = map[string]*mvccpb.KeyValue{}
}

// clone returns a deep copy that shares only the immutable key-values.
func (s *poolState) clone() *poolState {
	c := *s
	c.seats, c.seatRevs = maps.Clone(s.seats), maps.Clone(s.seatRevs)
	c.instances, c.queue, c.claimed = maps.Clone(s.instances), maps.Clone(s.queue), maps.Clone(s.claimed)
	c.fences, c.foreign, c.unleased = maps.Clone(s.fences), maps.Clone(s.foreign), maps.Clone(s.unleased)
	c.unadmitted = maps.Clone(s.unadmitted)
	c.binds, c.tenants, c.holders = cloneSlots(s.binds), cloneSlots(s.tenants), maps.Clone(s.holders)
	c.waiting, c.line = maps.Clone(s.waiting), slices.Clone(s.line)
	return &c
}

func cloneSlots(m map[string]map[int]int64) map[string]map[int]int64 {
	out := make(map[string]map[int]int64, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}

// load replaces the state with a full read of the pool prefix at rev. An
// older read than the whole state held is ignored (a feed follows events
// from its rev); a probed state is replaced by any whole read.
func (s *poolState) load(rev int64, kvs []*mvccpb.KeyValue) {
	if rev < s.rev && !s.probed {
		return
	}
	s.reset()
	s.rev = rev
	for _, kv := range kvs {
		s.put(kv)
	}
}

// heldSeats is the number of seats held, at or above the capacity too.
func (s *poolState) heldSeats() int { return len(s.seats) + s.unseenSeats }

// apply folds in watch events. Events at or below rev are already in. Only
// a whole state follows events (a probed one could not count the deletes
// of seats it never saw).
func (s *poolState) apply(evs []*clientv3.Event) {
	if s.probed {
		return // only a pool feed applies events, and it loads a whole state first
	}
	for _, ev := range evs {
		if ev.Kv.ModRevision <= s.rev {
			continue
		}
		if ev.Type == clientv3.EventTypeDelete {
			s.del(string(ev.Kv.Key))
		} else {
			s.put(ev.Kv)
		}
	}
	if n := len(evs); n > 0 && evs[n-1].Kv.ModRevision > s.rev {
		s.rev = evs[n-1].Kv.ModRevision
	}
}

// put records one key. A key that does not parse is remembered as foreign:
// claims refuse to run while one exists, because it could sit inside a range
// a claim compares and make every claim txn fail.
func (s *poolState) put(kv *mvccpb.KeyValue) {
	pk, err := s.k.parse(string(kv.Key))
	if err != nil || pk.Pool != s.pool {
		s.foreign[string(kv.Key)] = true
		return
	}
	switch pk.Seg {
	case segSpec:
		s.specKV = kv
		s.spec, s.specErr = decodeSpec(s.pool, kv.Value)
		s.countAbove()
	case segInstances:
		in, err := readInstance(pk.Name, kv)
		if err == nil {
			err = in.validate()
		}
		if err != nil {
			s.unadmit(pk.Name, kv) // not ours to admit; claims never bind to it
			return
		}
		delete(s.unadmitted, string(kv.Key))
		s.instances[pk.Name] = in
	case segSeats:
		if _, had := s.seats[pk.Slot]; !had && pk.Slot >= s.spec.Capacity {
			s.seatsAbove++
		}
		if prev, ok := s.holders[slotOf(string(kv.Key))]; ok {
			delete(s.claimed, prev) // a hand-off's put, applied before its delete
		}
		s.seats[pk.Slot], s.seatRevs[pk.Slot] = kv, kv.CreateRevision
		s.holders[slotOf(string(kv.Key))] = pk.Claim
		s.claimed[pk.Claim] = pk.Slot
	case segBinds:
		setSlot(s.binds, pk.Name, pk.Slot, kv.CreateRevision)
		s.holders[slotOf(string(kv.Key))] = pk.Claim
	case segTenants:
		setSlot(s.tenants, pk.Name, pk.Slot, kv.CreateRevision)
		s.holders[slotOf(string(kv.Key))] = pk.Claim
	case segQueue:
		if kv.Lease == 0 {
			s.unleased[string(kv.Key)] = true
			s.unqueue(string(kv.Key))
			return
		}
		delete(s.unleased, string(kv.Key))
		if _, ok := s.waiterRequest(kv); !ok {
			// Under a lease, but not a waiter's record (a value that does
			// not decode, a name not of its lease): no head would ever
			// serve it, and it would stand first in line for as long as
			// its lease lives. Claims say so instead (ErrForeignKey;
			// TestNonWaiterQueueKeySaysSo).
			s.foreign[string(kv.Key)] = true
			s.unqueue(string(kv.Key))
			return
		}
		old := s.queue[string(kv.Key)]
		s.queue[string(kv.Key)] = kv
		s.lineAdd(kv, old)
	case segFences:
		s.fences[leaseOfHex(pk.Name)] = kv.ModRevision
	case segWaiting:
		putWaiting(s.waiting, kv)
	}
}

func (s *poolState) del(key string) {
	pk, err := s.k.parse(key)
	if err != nil || pk.Pool != s.pool {
		delete(s.foreign, key)
		return
	}
	if pk.Claim != "" {
		if s.holders[slotOf(key)] != pk.Claim {
			return // the slot has passed to the next claim already
		}
		delete(s.holders, slotOf(key))
	}
	switch pk.Seg {
	case segSpec:
		s.specKV, s.spec, s.specErr = nil, PoolSpec{}, nil
		s.countAbove()
	case segInstances:
		delete(s.instances, pk.Name)
		delete(s.unadmitted, key)
	case segSeats:
		if _, had := s.seats[pk.Slot]; had && pk.Slot >= s.spec.Capacity {
			s.seatsAbove--
		}
		delete(s.seats, pk.Slot)
		delete(s.seatRevs, pk.Slot)
		delete(s.claimed, pk.Claim)
	case segBinds:
		delSlot(s.binds, pk.Name, pk.Slot)
	case segTenants:
		delSlot(s.tenants, pk.Name, pk.Slot)
	case segQueue:
		s.unqueue(key)
		delete(s.unleased, key)
		delete(s.foreign, key)
	case segFences:
		delete(s.fences, leaseOfHex(pk.Name))
	case segWaiting:
		delete(s.waiting, key)
	}
}

// unadmit records an instance key whose value claims do not admit, in
// place of any instance of that name it held.
func (s *poolState) unadmit(name string, kv *mvccpb.KeyValue) {
	delete(s.instances, name)
	s.unadmitted[string(kv.Key)] = kv.ModRevision
}

// countAbove recounts the seats at or above the capacity: once per spec
// change, so O(held) only then.
func (s *poolState) countAbove() {
	s.seatsAbove = 0
	for n := range s.seats {
		if n >= s.spec.Capacity {
			s.seatsAbove++
		}
	}
}

// slotOf returns the slot prefix of a seat or slot key: the key without
// its claim segment.
func slotOf(key string) string { return key[:strings.LastIndexByte(key, '/')+1] }

func setSlot(m map[string]map[int]int64, name string, n int, rev int64) {
	if m[name] == nil {
		m[name] = map[int]int64{}
	}
	m[name][n] = rev
}

func delSlot(m map[string]map[int]int64, name string, n int) {
	delete(m[name], n)
	if len(m[name]) == 0 {
		delete(m, name)
	}
}

// bound reports whether claims on this pool bind to instances.
func (s *poolState) bound() bool {
	return s.spec.RequireInstance || len(s.instances) > 0
}
