package coordinator_test

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// idle notes, after each revision the history applied, whether a seat is
// free while a waiter waits (the chaos pool binds no instances and its
// claimants have no tenant, so any waiter could take any free seat).
func (ch *chaos) idle(now time.Time) {
	h := ch.hist
	free := h.spec().Capacity - len(h.count("seats/"))
	waiting := 0
	for k := range h.kvs {
		if strings.HasPrefix(k, h.prefix+"queue/") {
			waiting++
		}
	}
	switch {
	case free > 0 && waiting > 0 && ch.idleSince.IsZero():
		ch.idleSince = now
	case (free <= 0 || waiting == 0) && !ch.idleSince.IsZero():
		d := now.Sub(ch.idleSince)
		ch.idleDurs = append(ch.idleDurs, d)
		if d > time.Second {
			ch.mu.Lock()
			ch.timeline = append(ch.timeline, fmt.Sprintf("%6.2fs seat free while %d waited, for %v (ended rev %d)",
				ch.idleSince.Sub(ch.start).Seconds(), waiting, d, h.rev))
			ch.mu.Unlock()
		}
		ch.idleSince = time.Time{}
	}
}

// check runs the checkers that need the whole run, and reports.
func (ch *chaos) check() {
	t, h := ch.t, ch.hist
	t.Logf("faults: %v", ch.faults)
	slices.Sort(ch.timeline)
	t.Logf("timeline:\n%s", strings.Join(ch.timeline, "\n"))
	t.Logf("history: %d grants replayed (capacity at each), %d checked for FIFO, %d fenced writes, %d stale",
		h.grants, h.fifo, h.writes, h.stale)
	if h.grants < 50 {
		t.Errorf("only %d grants in the run: the pool made no progress", h.grants)
	}
	judged, excused := ch.lossBeforeRegrant()
	t.Logf("loss before regrant: %d seat hand-overs judged, %d excused (holder killed or paused)", judged, excused)
	bound := chaosTTL + chaosElection + 2*time.Second
	if len(ch.idleDurs) > 0 {
		slices.Sort(ch.idleDurs)
		longest := ch.idleDurs[len(ch.idleDurs)-1]
		t.Logf("seat free while someone waited: %d stretches, median %v, max %v (bound %v)",
			len(ch.idleDurs), ch.idleDurs[len(ch.idleDurs)/2], longest, bound)
		if longest > bound {
			t.Errorf("a seat sat free for %v while a waiter waited; bound TTL + election + 2 s = %v", longest, bound)
		}
	}
}

// lossBeforeRegrant: for each seat, each token that followed another, the
// earlier holder (unless it released the seat, or was killed or paused)
// must have seen Done close before the txn that granted the later token was
// sent. Times are wall clock on one machine, in nanoseconds.
func (ch *chaos) lossBeforeRegrant() (judged, excused int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	sent := map[int64]int64{}            // revision -> when its txn was sent
	granted := map[int64]claimantEvent{} // token -> grant
	done := map[int64]claimantEvent{}    // token -> Done observed
	bySeat := map[int][]int64{}          // seat -> tokens granted to claimants
	for _, e := range ch.events {
		switch e.Ev {
		case "txn":
			sent[e.Rev] = e.At
		case "granted":
			granted[e.Token] = e
			bySeat[e.Seat] = append(bySeat[e.Seat], e.Token)
		case "done":
			done[e.Token] = e
		}
	}
	procs := map[string]*claimantProc{}
	for _, cp := range ch.claimants {
		procs[cp.id] = cp
	}
	for seat, tokens := range bySeat {
		slices.Sort(tokens)
		for i := 1; i < len(tokens); i++ {
			prev, next := granted[tokens[i-1]], tokens[i]
			d, saw := done[prev.Token]
			if saw && d.Released {
				continue // given back, not lost
			}
			s, ok := sent[next]
			if !ok {
				continue // its granter died before reporting the send
			}
			if procs[prev.Claimant].marked(time.Unix(0, prev.At), time.Unix(0, s)) {
				excused++
				continue
			}
			judged++
			switch {
			case !saw:
				ch.t.Errorf("seat %d: holder %s (token %d) never saw Done close, yet token %d was granted",
					seat, prev.Claimant, prev.Token, next)
			case d.At >= s:
				ch.t.Errorf("seat %d: holder %s (token %d) saw Done close %v AFTER the txn granting token %d was sent (%s)",
					seat, prev.Claimant, prev.Token, time.Duration(d.At-s), next, d.Err)
			}
		}
	}
	return judged, excused
}
