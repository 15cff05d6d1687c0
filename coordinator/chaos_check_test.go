package coordinator_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// idle notes, after each revision the history applied, whether a seat is
// free while a waiter waits that may take it: a waiter in line or held
// back (its waiting/ record) whose tenant, if any, holds fewer seats than
// its limit, while the pool holds fewer seats than its capacity and, for
// a waiter that selects instances, one of them is ready with a free seat;
// for one that does not, any ready instance (or none registered, the
// agent's lease lost: seats are anonymous then).
func (ch *chaos) idle(now time.Time) {
	h := ch.hist
	r := h.rooms()
	free := r.spec.Capacity - h.held()
	anyRoom, bound := h.instanceRoom()
	waiting := 0
	for k, kv := range h.kvs {
		if !strings.HasPrefix(k, h.prefix+"queue/") && !strings.HasPrefix(k, h.prefix+"waiting/") {
			continue
		}
		if ok, selects := r.servable(kv); ok && (selects || !bound || anyRoom > 0) {
			waiting++
		}
	}
	switch {
	case free > 0 && waiting > 0 && ch.idleSince.IsZero():
		ch.idleSince, ch.idleWaiting = now, waiting
	case free > 0 && waiting > 0:
		ch.idleWaiting = max(ch.idleWaiting, waiting)
	case (free <= 0 || waiting == 0) && !ch.idleSince.IsZero():
		d := now.Sub(ch.idleSince)
		ch.stretches = append(ch.stretches, stretch{ch.idleSince, now})
		if d > time.Second {
			ch.mu.Lock()
			ch.timeline = append(ch.timeline, fmt.Sprintf("%6.2fs seat free while up to %d waiters (queue keys or waiting records, until their leases end) could take it, for %v (ended rev %d)",
				ch.idleSince.Sub(ch.start).Seconds(), ch.idleWaiting, d, h.rev))
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
	t.Logf("history: %d grants replayed (capacity at each), %d bound to an instance, %d checked for FIFO, %d step-outs checked, %d fenced writes, %d stale; %d claims given up by their callers",
		h.grants, h.bound, h.fifo, h.steps, h.writes, h.stale, ch.count("gaveup"))
	// A stall is what this catches (each stretch of a seat left free while
	// someone waits is bounded by checkIdle). Runs grant 8-12 a second;
	// one that the nemesis keeps at capacity 1 (holds of up to 200 ms)
	// through a leader change every few seconds granted 43 in 27 s. So the
	// floor is one grant per second of the run.
	if floor := int(time.Since(ch.start).Seconds()); h.grants < floor {
		t.Errorf("only %d grants in %d s: the pool made no progress", h.grants, floor)
	}
	judged, excused := ch.lossBeforeRegrant()
	t.Logf("loss before regrant: %d seat hand-overs judged, %d excused (holder killed or paused)", judged, excused)
	ch.checkIdle()
	ch.breakdown()
}

// count returns how many events of kind ev the claimants reported.
func (ch *chaos) count(ev string) int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := 0
	for _, e := range ch.events {
		if e.Ev == ev {
			n++
		}
	}
	return n
}

// stretch is a time a seat sat free while someone waited.
type stretch struct{ from, to time.Time }

// checkIdle bounds each stretch of a seat sitting free while someone
// waited: TTL + 2 s (the waiter ahead may be dead and its key must expire),
// plus TTL + the longest election (chaosElectionMax) for each leader change
// in it or up to TTL + chaosElectionMax before it,
// since a new leader gives every lease its full TTL again (etcd#9888), the
// dead waiter's too; plus a TTL for each further claimant the nemesis
// killed, paused or cut off then, since each may be the next head and its
// key must expire in turn.
func (ch *chaos) checkIdle() {
	var durs []time.Duration
	worst := -time.Hour
	for _, s := range ch.stretches {
		d := s.to.Sub(s.from)
		durs = append(durs, d)
		// A fault counts from when it could still hold a lease that ends
		// in the stretch: a leader change refreshes leases when the new
		// leader is elected, up to chaosElectionMax after the kill.
		in := func(ts []time.Time) (n int) {
			for _, e := range ts {
				if !e.Before(s.from.Add(-chaosTTL-chaosElectionMax)) && !e.After(s.to) {
					n++
				}
			}
			return n
		}
		elections, cutoffs := in(ch.elections), in(ch.cutoffs)
		bound := chaosTTL + 2*time.Second + time.Duration(elections)*(chaosTTL+chaosElectionMax) +
			time.Duration(max(cutoffs-1, 0))*chaosTTL
		worst = max(worst, d-bound)
		if d > bound {
			ch.t.Errorf("a seat sat free for %v from %.2fs while someone waited; bound with %d leader changes %v",
				d, s.from.Sub(ch.start).Seconds(), elections, bound)
		}
	}
	if len(durs) > 0 {
		slices.Sort(durs)
		ch.t.Logf("seat free while someone waited: %d stretches, median %v, p99 %v, max %v; closest to its bound: %v under",
			len(durs), durs[len(durs)/2], durs[len(durs)*99/100], durs[len(durs)-1], -worst)
	}
}

// lossBeforeRegrant: for each seat, each token that followed another, the
// earlier holder (unless it released the seat, or was killed or paused)
// must have seen Done close before the txn that granted the later token was
// sent. Times are wall clock on one machine, in nanoseconds.
func (ch *chaos) lossBeforeRegrant() (judged, excused int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	// A token is a revision; one txn can grant several seats, so a claim
	// is named by seat and token.
	type claimID struct {
		seat  int
		token int64
	}
	sent := map[int64]int64{}              // revision -> when its txn was sent
	granted := map[claimID]claimantEvent{} // claim -> grant
	done := map[claimID]claimantEvent{}    // claim -> Done observed
	bySeat := map[int][]int64{}            // seat -> tokens granted to claimants
	for _, e := range ch.events {
		id := claimID{e.Seat, e.Token}
		switch e.Ev {
		case "txn":
			sent[e.Rev] = e.At
		case "granted":
			granted[id] = e
			bySeat[e.Seat] = append(bySeat[e.Seat], e.Token)
		case "done":
			done[id] = e
		}
	}
	procs := map[string]*claimantProc{}
	for _, cp := range ch.claimants {
		procs[cp.id] = cp
	}
	for seat, tokens := range bySeat {
		slices.Sort(tokens)
		for i := 1; i < len(tokens); i++ {
			prev, next := granted[claimID{seat, tokens[i-1]}], tokens[i]
			d, saw := done[claimID{seat, prev.Token}]
			if (saw && d.Released) || ch.hist.released[fmt.Sprintf("%sseats/%07d/", ch.hist.prefix, seat)][prev.Token] {
				continue // given back (the history shows its own release record), not lost
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

// instanceRoom returns the free seats of the ready instances, and whether
// any instance is registered (else seats are anonymous).
func (h *history) instanceRoom() (room int, bound bool) {
	binds := h.count("binds/")
	for k, kv := range h.kvs {
		id, ok := strings.CutPrefix(k, h.prefix+"instances/")
		if !ok {
			continue
		}
		bound = true
		var in coordinator.Instance
		if json.Unmarshal(kv.Value, &in) == nil && in.State == coordinator.InstanceReady {
			room += max(0, in.Seats-binds[id])
		}
	}
	return room, bound
}
