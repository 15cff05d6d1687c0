package coordinator_test

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Where the time goes (issue 7 §2): the chaos run's delays split by cause.
//
//   - A SIGKILLed holder's seat frees when its lease expires: the TTL, plus
//     a refresh of every lease when a new leader takes over (etcd#9888).
//     Each kill is timed from the signal to the revision that deleted the
//     seat, as the history watcher saw it, with or without a leader change
//     in between.
//   - Each stretch of a seat sitting free while someone waited is put
//     under the first of: a leader change in it or just before it (see
//     checkIdle), a follower killed then (its clients reconnect to another
//     member), a claimant cut off (killed, paused, blackholed) then, or
//     none of these, which is the waiter's own path: its watch, its claim
//     txn and any retry.
//   - The claimants' own retries (Metrics.Retry), by op, over the whole
//     run and inside the free stretches: backing off while etcd answers
//     with errors. A request to an unreachable member waits inside the
//     etcd client instead, and shows only as stretch time.

// kill is a claimant the nemesis SIGKILLed, and when.
type kill struct {
	id string
	at time.Time
}

// breakdown logs where the run's delays went.
func (ch *chaos) breakdown() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.t
	elected := func(from, to time.Time) bool {
		for _, e := range ch.elections {
			if !e.Before(from) && !e.After(to) {
				return true
			}
		}
		return false
	}
	// Kill -> seat free.
	held := map[string]map[int64]int64{} // claimant -> token -> granted at
	var retries []claimantEvent
	for _, e := range ch.events {
		switch e.Ev {
		case "granted":
			if held[e.Claimant] == nil {
				held[e.Claimant] = map[int64]int64{}
			}
			held[e.Claimant][e.Token] = e.At
		case "retry":
			retries = append(retries, e)
		}
	}
	var plain, withElection []time.Duration
	for _, k := range ch.kills {
		for token, at := range held[k.id] {
			rev, ok := ch.hist.freed[token]
			if !ok || at > k.at.UnixNano() || ch.hist.releasedToken(token) {
				continue // not held at the kill, or given back by its own release in flight
			}
			freedAt, ok := ch.arrivals[rev]
			if !ok || freedAt.Before(k.at) {
				continue // released before the kill
			}
			d := freedAt.Sub(k.at)
			if elected(k.at.Add(-chaosElection), freedAt) {
				withElection = append(withElection, d)
			} else {
				plain = append(plain, d)
			}
		}
	}
	t.Logf("where the time goes: SIGKILLed holder -> its seat free (TTL %v): %s without a leader change; %s with one",
		chaosTTL, spread(plain), spread(withElection))
	// Free stretches by cause. Stretches and retries are both in time
	// order, so one pass attributes the retries (a run has ~10^5 of each).
	by := map[string][]time.Duration{}
	inside := map[string][2]int64{} // op -> retries, backoff ns inside stretches
	slices.SortFunc(retries, func(a, b claimantEvent) int { return int(a.At - b.At) })
	next := 0
	for _, s := range ch.stretches {
		in := func(ts []time.Time) bool {
			for _, e := range ts {
				if !e.Before(s.from.Add(-chaosTTL-chaosElection)) && !e.After(s.to) {
					return true
				}
			}
			return false
		}
		cause := "none of these"
		switch {
		case in(ch.elections):
			cause = "leader change"
		case in(ch.downs):
			cause = "follower killed"
		case in(ch.cutoffs):
			cause = "claimant cut off"
		}
		by[cause] = append(by[cause], s.to.Sub(s.from))
		for next < len(retries) && retries[next].At < s.from.UnixNano() {
			next++
		}
		for _, r := range retries[next:] {
			if r.At > s.to.UnixNano() {
				break
			}
			v := inside[r.Op]
			inside[r.Op] = [2]int64{v[0] + 1, v[1] + r.Wait}
		}
	}
	var lines []string
	for _, cause := range []string{"leader change", "follower killed", "claimant cut off", "none of these"} {
		lines = append(lines, fmt.Sprintf("%s: %s", cause, spread(by[cause])))
	}
	t.Logf("where the time goes: seat free while someone waited, by what overlapped it: %s", strings.Join(lines, "; "))
	total := map[string][2]int64{}
	for _, r := range retries {
		v := total[r.Op]
		total[r.Op] = [2]int64{v[0] + 1, v[1] + r.Wait}
	}
	t.Logf("where the time goes: claimant retries by op (count, backoff), whole run: %s; inside free stretches: %s",
		opTable(total), opTable(inside))
}

// spread is "n, median m, p90 p, max x" of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%d, median %v, p90 %v, max %v", len(ds), r(ds[len(ds)/2]), r(ds[len(ds)*9/10]), r(ds[len(ds)-1]))
}

func opTable(m map[string][2]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var ops []string
	for op, v := range m {
		ops = append(ops, fmt.Sprintf("%s %d (%v)", op, v[0], time.Duration(v[1]).Round(time.Millisecond)))
	}
	slices.Sort(ops)
	return strings.Join(ops, ", ")
}
