package coordinator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Held-back waiters of one process rejoin in arrival order. A waiter held
// back off the line by its own tenant limit or instance selector
// (queue.go) joins the line when its constraints would admit it. When a
// tenant's seat frees, every held-back waiter of that tenant sees it in
// the same change of the pool; if each then joined at once, they would
// join in the order the Go scheduler runs them, which is often the last
// one woken first (TestHeldBackRejoinInArrivalOrder granted the fourth
// waiter of four first). So within a process, the held-back waiters of one
// constraint class (the same tenant, instance and labels: constraints
// that admit them alike) take turns: only the first to arrive joins the
// line; the next one looks again once that one's enqueue txn has
// returned, and joins behind it if its constraints still admit it. And a
// claim made meanwhile in this process, of the same class, does not take
// the seat before them: it waits behind them, or without WithWait is
// refused as a claim is when others wait in line (sharedState.plan).
//
// What it does not do: order held-back waiters of different processes, or
// of different classes, which join in the order they react; or stop a
// claim of another process from taking the freed seat first (README,
// Known limits). The order is kept in memory only: it costs no RPC and
// no key, and a process that dies takes its waiters' turns with it.

// heldBackTurn is a constrained waiter's turn among this process's
// waiters of its class on a pool, kept across its steps out of line.
type heldBackTurn struct {
	class  string // constraintClass of its options
	seq    uint64 // arrival order in this process; 0 until it is first held back
	inLine bool   // it has joined the line and not yet been granted or left
}

// constraintClass names the constraints of o that decide whether its own
// limits admit it: claims of one class are admitted alike.
func constraintClass(o claimOptions) string {
	labels := make([]string, 0, len(o.labels))
	for k, v := range o.labels {
		labels = append(labels, k+"="+v)
	}
	slices.Sort(labels)
	return fmt.Sprintf("%q %q %q", o.tenant, o.instance, strings.Join(labels, "\x00"))
}

// holdBack adds t to the pool's held-back waiters of its class, in
// arrival order, taking it out of line if it was in: a turn seen before
// keeps its place.
func (sh *sharedState) holdBack(t *heldBackTurn) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.leaveLine(t)
	if t.seq == 0 {
		sh.arrivals++
		t.seq = sh.arrivals
	}
	turns := sh.heldBack[t.class]
	if slices.Contains(turns, t) {
		return
	}
	i, _ := slices.BinarySearchFunc(turns, t.seq, func(x *heldBackTurn, seq uint64) int { return cmp.Compare(x.seq, seq) })
	if sh.heldBack == nil {
		sh.heldBack = map[string][]*heldBackTurn{}
	}
	sh.heldBack[t.class] = slices.Insert(turns, i, t)
}

// joined moves t, whose enqueue txn committed, from the held-back waiters
// of its class to those in line, and wakes the next of its class.
func (sh *sharedState) joined(t *heldBackTurn) {
	if t == nil {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.unlist(t)
	t.inLine = true
	if sh.inLine == nil {
		sh.inLine = map[string]int{}
	}
	sh.inLine[t.class]++
	sh.wake()
}

// done drops t, granted or given up, and wakes the next of its class: it
// may be waiting for its turn, and no change of the pool may follow (a
// waiter that gave up writes nothing).
func (sh *sharedState) done(t *heldBackTurn) {
	if t == nil {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.unlist(t)
	sh.leaveLine(t)
	sh.wake()
}

// unlist removes t from the held-back waiters of its class, if there.
func (sh *sharedState) unlist(t *heldBackTurn) {
	turns := sh.heldBack[t.class]
	i := slices.Index(turns, t)
	if i < 0 {
		return
	}
	if turns = slices.Delete(turns, i, i+1); len(turns) == 0 {
		delete(sh.heldBack, t.class)
	} else {
		sh.heldBack[t.class] = turns
	}
}

// leaveLine uncounts t from the waiters of its class in line, if there.
func (sh *sharedState) leaveLine(t *heldBackTurn) {
	if !t.inLine {
		return
	}
	t.inLine = false
	if sh.inLine[t.class]--; sh.inLine[t.class] == 0 {
		delete(sh.inLine, t.class)
	}
}

// wake wakes the users of the pool's feed, under sh.mu.
func (sh *sharedState) wake() {
	if sh.fed != nil {
		sh.fed.poke()
	}
}

// mayJoin reports whether t, a held-back claim with options o whose own
// constraints admit it on live, may join the line now: it is the first
// held-back waiter of its class, and those of its class already in line
// do not take all the room its constraints leave. Under sh.mu (from a
// feed look).
func (sh *sharedState) mayJoin(t *heldBackTurn, live *poolState, o claimOptions) bool {
	turns := sh.heldBack[t.class]
	if len(turns) == 0 || turns[0] != t {
		return false
	}
	k := sh.inLine[t.class]
	return k == 0 || live.ownRoom(o) > k
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

// heldBackTurnStatus is the status of a held-back waiter whose constraints
// admit it while earlier ones of its class go first.
var heldBackTurnStatus = WaitStatus{Reason: WaitQueue,
	Detail: "earlier claimants of this process with the same tenant and instance selector go first"}
