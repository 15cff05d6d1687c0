package metrics

import (
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// maxPending bounds the waiters Follow remembers, so that joins whose
// leaves were lost (across a resync) cannot grow without limit.
const maxPending = 10_000

// Follow derives claim, grant-wait and loss figures from a coordinator
// event stream, for claims made by other processes, where the library's
// Metrics hook does not run. It reads until events is closed. include
// selects the pools to count; nil counts all.
//
// What the stream can show, and so what is counted:
//   - claims_total{result="granted"} per seat-claimed event;
//   - claims_total{result="canceled"} per waiter that left the queue
//     without a seat in the same transaction (gave up or expired);
//   - grant_wait_seconds: from waiter-joined to seat-claimed for the same
//     holder, as seen by this watcher; 0 for claims that did not queue;
//   - seats_lost_total by reason: expired, force_released, instance_gone,
//     pool_deleted. Plain releases are not losses.
//
// Claims refused with no_seat or failing with an error write nothing to
// etcd and are invisible here. Every agent that follows a pool counts its
// claims: aggregate with max, not sum, across agents of one pool.
func (m *Metrics) Follow(events <-chan coordinator.Event, include func(pool string) bool) {
	f := follower{m: m, joins: map[string][]time.Time{}, granted: map[string]int64{}}
	for ev := range events {
		if ev.Type == coordinator.EventResync {
			f.joins, f.granted = map[string][]time.Time{}, map[string]int64{}
			continue
		}
		if include == nil || include(ev.Pool) {
			f.handle(ev)
		}
	}
}

type follower struct {
	m       *Metrics
	joins   map[string][]time.Time // pool+holder -> join times, oldest first
	granted map[string]int64       // pool+holder -> revision of its last grant
}

func (f *follower) handle(ev coordinator.Event) {
	key := ev.Pool + "\x00" + ev.Holder
	switch ev.Type {
	case coordinator.EventWaiterJoined:
		if len(f.joins) >= maxPending {
			f.joins = map[string][]time.Time{}
		}
		f.joins[key] = append(f.joins[key], ev.Time)
	case coordinator.EventSeatClaimed:
		var wait time.Duration
		if t, ok := f.pop(key); ok {
			wait = ev.Time.Sub(t)
		}
		if len(f.granted) >= maxPending {
			f.granted = map[string]int64{}
		}
		f.granted[key] = ev.Revision
		f.m.ClaimResult(ev.Pool, coordinator.ResultGranted)
		f.m.GrantWait(ev.Pool, max(wait, 0))
	case coordinator.EventWaiterLeft:
		// A granted waiter's queue key is deleted in its claim's txn, which
		// the stream delivers after the seat it created.
		if f.granted[key] == ev.Revision {
			delete(f.granted, key)
			return
		}
		f.pop(key)
		f.m.ClaimResult(ev.Pool, coordinator.ResultCanceled)
	case coordinator.EventSeatExpired, coordinator.EventSeatForceReleased, coordinator.EventSeatReleased:
		if reason := ev.LossReason(); reason != "" {
			f.m.SeatLost(ev.Pool, reason)
		}
	}
}

func (f *follower) pop(key string) (time.Time, bool) {
	q := f.joins[key]
	if len(q) == 0 {
		return time.Time{}, false
	}
	if len(q) == 1 {
		delete(f.joins, key)
	} else {
		f.joins[key] = q[1:]
	}
	return q[0], true
}
