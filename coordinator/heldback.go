package coordinator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Held-back waiters of one Coordinator rejoin in arrival order, as many at
// a time as their constraints admit. A waiter held back off the line by its own tenant limit or
// instance selector (queue.go) joins the line when its constraints would
// admit it. When a tenant's seat frees, every held-back waiter of that
// tenant sees it in the same change of the pool. If each then joined at
// once, they would join in the order the Go scheduler runs them, often the
// last one woken first (TestHeldBackRejoinInArrivalOrder served four
// waiters of one tenant last-arrived first), and all but one would step
// out of line again at the head: a release of the tenant's seat cost every
// held-back waiter two txns (TestHeldBackWaitersNoHerd: 41 txns for 20
// waiters; 3 now). So the held-back waiters of one constraint class (the
// same tenant, instance and labels: constraints that admit them alike)
// take turns:
//
//   - a listed waiter joins the line when its constraints admit more
//     claims than there are waiters of its class ahead of it: those listed
//     before it, those in line (of any process), and those granted a seat
//     that the view does not show yet; and, for a short grace, those held
//     back before it in other processes (heldback_peers.go). With room
//     for one, that is the first, then the next once the first is granted
//     and its seat seen, gone or out of line again (barred at the head);
//   - a waiter of the class that arrives while others are listed, and a
//     claim of the class made meanwhile, do not go before them: a waiter
//     is listed behind them, and a claim without WithWait is refused as
//     when others wait in line (sharedState.plan).
//
// A waiter that its constraints admit when it arrives, none of its class
// being listed in this process or granted unseen, joins the line at once,
// as any waiter does, whoever of its class is in line or held back in
// other processes (TestAdmittedWaitersKeepLineOrder).
//
// What it does not do:
//   - order held-back waiters of different Coordinators (processes) for
//     longer than heldBackGrace (a later one joins when the earlier has not
//     within it), or of different classes, which join in the order they
//     react; or stop a claim of another Coordinator from taking the freed
//     seat first;
//   - keep a held-back waiter's place against other classes: it joins the
//     line at the back when its turn comes, behind waiters of other
//     classes that arrived while its class's room was taken;
//   - order waiters that join at once because their room admits them all
//     (a limit raised, say): they join in the order they react.
//
// The turns are kept in memory, per Coordinator and pool. They cost no
// RPC of their own; a waiter listed behind others that has no waiting
// record yet writes one (waitTurn), so that it is not invisible.

// heldBackTurn is a constrained waiter's turn among this process's
// waiters of its class on a pool, kept across its steps out of line.
type heldBackTurn struct {
	class  string // constraintClass of its options
	record string // its waiting key (waiting.go)
	seq    uint64 // arrival order in this process
	listed bool   // it is among the held-back waiters of its class
	inLine bool   // it joined the line from being held back, and is there
	// keptSince is when its constraints, and this process's turns, last
	// began to admit it while other processes' earlier held-back waiters
	// kept it back (heldback_peers.go); zero while they do not, and
	// always while it is not listed (it is set only after list).
	keptSince time.Time
}

// constraintClass names the constraints of o that decide whether its own
// limits admit it: claims of one class are admitted alike. Each part is
// quoted, so that no two selectors share a name.
func constraintClass(o claimOptions) string {
	b := fmt.Appendf(nil, "%q %q", o.tenant, o.instance)
	for _, k := range slices.Sorted(maps.Keys(o.labels)) {
		b = fmt.Appendf(b, " %q=%q", k, o.labels[k])
	}
	return string(b)
}

// arrive returns the turn of a claim with options o that starts to wait,
// whose waiting record is at key record.
func (sh *sharedState) arrive(o claimOptions, record string) *heldBackTurn {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.arrivals++
	if sh.ownRecords == nil {
		sh.ownRecords = map[string]bool{}
	}
	sh.ownRecords[record] = true
	return &heldBackTurn{class: constraintClass(o), record: record, seq: sh.arrivals}
}

// mayJoin reports whether t, a waiter with options o off the line, may
// join it now on live, where fits is live.ownFits(o), and lists t among
// the held-back waiters of its class unless it joins at once: a waiter
// not listed yet that fits joins whoever of its class is in line or held
// back elsewhere, unless one of its class is listed in this process or
// granted unseen. A listed turn may join when its constraints admit more
// claims than there are waiters of its class ahead of it: those listed
// before it in this process; those in line, of this process (joined from
// the list, seen or not) or of any (in the view); those granted seats the
// view does not show yet (unseenGrants); and, for up to heldBackGrace,
// those held back before it in other processes (heldback_peers.go).
//
// lags reports that only this process's unseen grants keep it back: the
// view is behind them, and the next look, once the feed brings them,
// decides. wait > 0 reports that only other processes' earlier waiters
// begin to keep it back, for at most that long: the caller looks again
// then. It is reported once per spell: a look within the spell returns
// all zero, as for a turn that waits for earlier ones. Under sh.mu (from
// a feed look); O(log n) in the n listed, but for a listed turn that
// fits, which reads the view's line and records once per revision of the
// view.
func (sh *sharedState) mayJoin(t *heldBackTurn, live *poolState, o claimOptions, fits bool) (join, lags bool, wait time.Duration) {
	if !fits {
		sh.list(t)
		t.keptSince = time.Time{}
		return false, false, 0
	}
	turns := sh.heldBack[t.class]
	unseen := sh.unseenGrants(t.class, live.rev)
	if !t.listed && len(turns) == 0 && unseen == 0 {
		return true, false, 0
	}
	i := sh.list(t)
	admits := func(ahead int) bool { return ahead == 0 || live.ownRoom(o, ahead+1) > ahead }
	ahead := i + max(sh.inLine[t.class], sh.inLineAt(live)[t.class])
	if !admits(ahead + unseen) {
		t.keptSince = time.Time{}
		return false, unseen > 0 && admits(ahead), 0
	}
	records := sh.recordsAt(live)[t.class]
	if before := sh.peersBefore(records, t.record); before > 0 && !admits(ahead+before) {
		if left, first := t.keptByPeers(time.Now()); left > 0 {
			if !first {
				left = 0 // the caller looks again when the first left ends
			}
			return false, false, left
		}
	}
	t.keptSince = time.Time{}
	return true, false, 0
}

// unseenGrants returns how many waiters of class were granted seats that
// a view at revision rev does not show, forgetting those it does. Their
// seats take room that the view shows free: until the pool's feed brings
// them, each counts as a waiter of the class ahead (mayJoin). Without
// that, the next listed waiter joined the line on the room its
// predecessor had just taken, and stepped out again at the head: two txns
// for nothing (TestGrantedTurnKeepsItsRoom). Under sh.mu.
func (sh *sharedState) unseenGrants(class string, rev int64) int {
	if len(sh.unseen) == 0 {
		return 0
	}
	tokens := slices.DeleteFunc(sh.unseen[class], func(token int64) bool { return token <= rev })
	if len(tokens) == 0 {
		delete(sh.unseen, class)
	} else {
		sh.unseen[class] = tokens
	}
	return len(tokens)
}

// list puts t among the held-back waiters of its class, at its arrival,
// unless it is there, and returns its index. Under sh.mu.
func (sh *sharedState) list(t *heldBackTurn) int {
	turns := sh.heldBack[t.class]
	i := turnIndex(turns, t.seq)
	if !t.listed {
		if sh.heldBack == nil {
			sh.heldBack = map[string][]*heldBackTurn{}
		}
		sh.heldBack[t.class] = slices.Insert(turns, i, t)
		t.listed = true
	}
	return i
}

// turnIndex is where the turn of arrival seq is, or goes, in turns, which
// are in arrival order.
func turnIndex(turns []*heldBackTurn, seq uint64) int {
	i, _ := slices.BinarySearchFunc(turns, seq, func(x *heldBackTurn, seq uint64) int { return cmp.Compare(x.seq, seq) })
	return i
}

// joined notes that t's enqueue txn committed. A turn held back before
// moves to those of its class in line, and the next of its class may go.
func (sh *sharedState) joined(t *heldBackTurn) {
	if t == nil {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.unlist(t) {
		return // it joined as the line's, not as a held-back waiter's
	}
	t.inLine = true
	if sh.inLine == nil {
		sh.inLine = map[string]int{}
	}
	sh.inLine[t.class]++
	sh.wake()
}

// steppedOut notes that t left the line again, barred at its head: it is
// listed again at its arrival, in the same step, so that none of its class
// that arrived after it joins the line in between and goes first (as one
// did when it was listed only at its next look), and the room it took in
// line is free for those before it.
func (sh *sharedState) steppedOut(t *heldBackTurn) {
	if t == nil {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.leaveLine(t)
	sh.list(t)
	sh.wake()
}

// done drops t, granted the seat of token (0: it gave up), and wakes the
// next of its class if it may be waiting for t: no change of the pool may
// follow (a waiter that gave up writes nothing). A seat the view does not
// show yet is counted until it does (unseenGrants).
func (sh *sharedState) done(t *heldBackTurn, token int64) {
	if t == nil {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for class := range sh.unseen { // forget, of every class, those the view shows
		sh.unseenGrants(class, sh.st.rev)
	}
	if token > sh.st.rev {
		if sh.unseen == nil {
			sh.unseen = map[string][]int64{}
		}
		sh.unseen[t.class] = append(sh.unseen[t.class], token)
	}
	delete(sh.ownRecords, t.record)
	listed := sh.unlist(t)
	if sh.leaveLine(t) || listed {
		sh.wake()
	}
}

// unlist removes t from the held-back waiters of its class, and reports
// whether it was there.
func (sh *sharedState) unlist(t *heldBackTurn) bool {
	if !t.listed {
		return false
	}
	t.listed = false
	turns := sh.heldBack[t.class]
	i := turnIndex(turns, t.seq)
	if turns = slices.Delete(turns, i, i+1); len(turns) == 0 {
		delete(sh.heldBack, t.class)
	} else {
		sh.heldBack[t.class] = turns
	}
	return true
}

// leaveLine uncounts t from the waiters of its class in line, and reports
// whether it was counted.
func (sh *sharedState) leaveLine(t *heldBackTurn) bool {
	if !t.inLine {
		return false
	}
	t.inLine = false
	if sh.inLine[t.class]--; sh.inLine[t.class] == 0 {
		delete(sh.inLine, t.class)
	}
	return true
}

// wake wakes the users of the pool's feed, under sh.mu.
func (sh *sharedState) wake() {
	if sh.fed != nil {
		sh.fed.poke()
	}
}

// heldBackAhead returns the error that keeps a fresh claim with options o
// from taking a seat while held-back waiters of its class wait in this
// process, or nil; under sh.mu.
func (sh *sharedState) heldBackAhead(o claimOptions) error {
	if len(sh.heldBack) == 0 || !o.constrained() {
		return nil
	}
	n := len(sh.heldBack[constraintClass(o)])
	if n == 0 {
		return nil
	}
	return &NoSeatError{Pool: sh.st.pool, Reason: WaitQueue,
		Detail: fmt.Sprintf("%d earlier %s of this process with the same tenant and instance selector %s for the seats its limits admit",
			n, plural(n, "claimant", "claimants"), plural(n, "waits", "wait"))}
}

// heldBackAhead is sharedState.heldBackAhead for pool, if this
// Coordinator has ever looked at it (Explain).
func (c *Coordinator) heldBackAhead(pool string, o claimOptions) error {
	c.mu.Lock()
	sh := c.states[pool]
	c.mu.Unlock()
	if sh == nil {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.heldBackAhead(o)
}

// heldBackTurnStatus is the status of a held-back waiter whose constraints
// admit it: it joins the line after the earlier waiters of its class (of
// its process, those in line of any, and, for heldBackGrace, those held
// back in others). Queue says it of any held-back waiter whose
// constraints admit it, as a process that does not hold the turns sees it.
var heldBackTurnStatus = WaitStatus{Reason: WaitQueue,
	Detail: "its own limits admit it: it joins the line after the earlier waiters of its tenant and instance selector"}
