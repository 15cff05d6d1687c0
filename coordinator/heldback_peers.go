package coordinator

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Held-back waiters of other processes. The turns of heldback.go order
// one process's held-back waiters of a constraint class. Those of other
// processes show in the pool's view: a held-back waiter keeps a waiting
// record (waiting.go), created when it is held back, and one that joined
// the line has its queue key. So a listed waiter whose constraints admit
// it counts as waiters of its class ahead of it, besides those of its own
// process (mayJoin):
//
//   - the waiters of its class in line, of any process: they are ahead of
//     it in line and take the room first. Once one process's waiter joins,
//     the others, once their view shows its queue key, see the room taken
//     and stay off the line;
//   - the waiting records of its class that other processes' waiters hold
//     and that are older than its own (all of them while its own is not
//     in the view), by the create revision of each waiter's first record:
//     a waiter that steps out of line, barred at its head, writes its
//     record again with that revision (waitingRecord.First), and so keeps
//     its place. So when a freed seat admits one waiter, the one
//     held back first joins, and the first waiters of the other processes
//     wait for its queue key instead of joining beside it, each to step
//     out again at the head (TestHeldBackHerdAcrossProcesses).
//
// A waiter not listed yet that its constraints admit, none of its class
// being listed in its process or granted a seat its view does not show
// yet, joins the line at once, as before, records or not: so a stale
// record never delays, or reorders, a fresh arrival. Held back and
// listed, it lets the earlier ones of other processes go first as above.
//
// The records are a hint, not a rule. A record can outlive its waiter: a
// put whose answer was lost that lands after the waiter joined the line
// or gave up stays until the waiter's session ends, and a paused or
// cut-off process's waiters cannot react. And a waiter whose own record
// is not written counts every record as earlier. So a waiter kept back by
// other processes' records alone joins anyway once it has been kept so for
// heldBackGrace: a stale record costs a freed room that long, never more,
// and never blocks a waiter for good (the hazards for which records as a
// rule were reverted in 120b70e). A waiter that joins in that grace, or a
// claim of another process made meanwhile, still goes before; FIFO among
// waiters in line is the queue's, unchanged.

// heldBackGrace is how long a held-back waiter that its constraints admit
// lets earlier held-back waiters of its class in other processes go first
// (see above). It covers their reaction to the same change of the pool and
// their enqueue's round trip on a loaded etcd.
const heldBackGrace = 100 * time.Millisecond

// recordsAt and inLineAt read the view once per revision. This process's
// own writes, folded into the view before the feed brings them
// (poolState.committed, forgetIn), do not move its revision, so until the
// feed's next change the memo may still count a queue key or record that
// they deleted: that only keeps a turn back, and no longer than that
// change (or, for records, the grace).

// recordAt is a waiting record's key and its waiter's place: the create
// revision of its first record (waitingRecord.First).
type recordAt struct {
	key string
	rev int64
}

// recordOf returns the place of the waiting record rec at kv.
func recordOf(kv *mvccpb.KeyValue, rec waitingRecord) recordAt {
	return recordAt{key: string(kv.Key), rev: rec.place(kv)}
}

// compare orders held-back waiters by their places, and by key the ties
// that only a forged First can make.
func (r recordAt) compare(o recordAt) int {
	return cmp.Or(cmp.Compare(r.rev, o.rev), strings.Compare(r.key, o.key))
}

// recordsAt returns the waiting records of each constraint class in live,
// in the order of their waiters' first records, read once per revision of
// the view. Under sh.mu.
func (sh *sharedState) recordsAt(live *poolState) map[string][]recordAt {
	if sh.records != nil && sh.recordsRev == live.rev {
		return sh.records
	}
	m := map[string][]recordAt{}
	for _, kv := range live.waiting {
		var rec waitingRecord
		if json.Unmarshal(kv.Value, &rec) != nil {
			continue
		}
		if o := (claimOptions{tenant: rec.Tenant, instance: rec.Instance, labels: rec.Labels}); o.constrained() {
			class := constraintClass(o)
			m[class] = append(m[class], recordOf(kv, rec))
		}
	}
	for _, recs := range m {
		slices.SortFunc(recs, recordAt.compare)
	}
	sh.records, sh.recordsRev = m, live.rev
	return m
}

// inLineAt returns how many waiters of each constraint class are in line
// in live, counted once per revision of the view. Under sh.mu.
func (sh *sharedState) inLineAt(live *poolState) map[string]int {
	if sh.lineClasses != nil && sh.lineClassesRev == live.rev {
		return sh.lineClasses
	}
	m := map[string]int{}
	for _, kv := range live.line {
		if req, ok := live.waiterRequest(kv); ok && req.opts.constrained() {
			m[constraintClass(req.opts)]++
		}
	}
	sh.lineClasses, sh.lineClassesRev = m, live.rev
	return m
}

// peersBefore returns how many of records (a class's, in order) other
// processes' waiters hold before the record at key own (all of them while
// own is not in the view), skipping those of this process's turns, which
// mayJoin counts in their turn. Under sh.mu.
func (sh *sharedState) peersBefore(records []recordAt, own string) int {
	n := 0
	for _, r := range records {
		if r.key == own {
			break
		}
		if !sh.ownRecords[r.key] {
			n++
		}
	}
	return n
}

// keptByPeers notes that t is kept off the line only by earlier waiters of
// other processes, and returns how long it still lets them go first (0:
// its grace is over, and it joins), and whether the spell began now.
func (t *heldBackTurn) keptByPeers(now time.Time) (left time.Duration, first bool) {
	if t.keptSince.IsZero() {
		t.keptSince, first = now, true
	}
	return max(0, heldBackGrace-now.Sub(t.keptSince)), first
}
