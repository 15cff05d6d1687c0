package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdpool/etcdpool/coordinator"
)

// maxPending bounds the waiters Follow remembers, so that joins whose
// leaves were lost (across a resync) cannot grow without limit.
const maxPending = 10_000

// Observed holds the pool families derived from the event stream:
// etcdpool_pool_claims_total, etcdpool_pool_grant_wait_seconds,
// etcdpool_pool_seat_hold_seconds and etcdpool_pool_seats_lost_total. They
// count the claims of every process on the pool, as one watcher sees them,
// so every agent following the pool exports the same figures: aggregate
// them with max by (pool), never sum.
type Observed struct {
	claims    *prometheus.CounterVec
	grantWait *prometheus.HistogramVec
	hold      *prometheus.HistogramVec
	seatsLost *prometheus.CounterVec
}

// NewObserved creates the pool families derived from events and registers
// them with reg. It panics if they are already registered there.
func NewObserved(reg prometheus.Registerer) *Observed {
	o := &Observed{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pool_claims_total",
			Help: "Claims on the pool by any process, as this watcher saw them, by result: granted, canceled. Aggregate with max across agents."}, []string{"pool", "result"}),
		grantWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "pool_grant_wait_seconds",
			Help: "Time from joining the queue to the grant, as this watcher saw it; 0 for claims that did not queue.", Buckets: GrantWaitBuckets}, []string{"pool"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "pool_seat_hold_seconds",
			Help: "Time seats of the pool were held, from the claim to the release, expiry or force-release, as this watcher saw it.", Buckets: HoldBuckets}, []string{"pool"}),
		seatsLost: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "pool_seats_lost_total",
			Help: "Seats of the pool taken from their holders, as this watcher saw them, by reason: expired, force_released, instance_gone, pool_deleted."}, []string{"pool", "reason"}),
	}
	reg.MustRegister(o.claims, o.grantWait, o.hold, o.seatsLost)
	return o
}

// Follow derives claim, grant-wait, hold and loss figures from a
// coordinator event stream, for claims made by any process, where the
// library's Metrics hook does not run. It reads until events is closed.
// include selects the pools to count; nil counts all.
//
// What the stream can show, and so what is counted:
//   - pool_claims_total{result="granted"} per seat-claimed event;
//   - pool_claims_total{result="canceled"} per waiter that left the queue
//     without a seat in the same transaction (gave up or expired);
//   - pool_grant_wait_seconds: from waiter-joined to seat-claimed for the
//     same holder, as seen by this watcher; 0 for claims that did not queue;
//   - pool_seat_hold_seconds: from seat-claimed to the seat's deletion, for
//     the same token, both seen by this watcher;
//   - pool_seats_lost_total by reason: expired, force_released,
//     instance_gone, pool_deleted. Plain releases are not losses.
//
// Claims refused with no_seat or failing with an error write nothing to
// etcd and are invisible here; the claimant's own etcdpool_claims_total
// counts them.
func (o *Observed) Follow(events <-chan coordinator.Event, include func(pool string) bool) {
	f := newFollower(o)
	for ev := range events {
		if ev.Type == coordinator.EventResync {
			f = newFollower(o)
			continue
		}
		if include == nil || include(ev.Pool) {
			f.handle(ev)
		}
	}
}

type follower struct {
	o       *Observed
	joins   map[string][]time.Time // pool+holder -> join times, oldest first
	granted map[string]int64       // pool+holder -> revision of its last grant
	held    map[seatKey]time.Time  // pool+token -> when its claim was seen
}

type seatKey struct {
	pool  string
	token int64
}

func newFollower(o *Observed) *follower {
	return &follower{o: o, joins: map[string][]time.Time{}, granted: map[string]int64{}, held: map[seatKey]time.Time{}}
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
		if len(f.held) >= maxPending {
			f.held = map[seatKey]time.Time{}
		}
		f.held[seatKey{ev.Pool, ev.Token}] = ev.Time
		f.o.claims.WithLabelValues(ev.Pool, coordinator.ResultGranted).Inc()
		f.o.grantWait.WithLabelValues(ev.Pool).Observe(max(wait, 0).Seconds())
	case coordinator.EventWaiterLeft:
		// A granted waiter's queue key is deleted in its claim's txn, which
		// the stream delivers after the seat it created.
		if f.granted[key] == ev.Revision {
			delete(f.granted, key)
			return
		}
		f.pop(key)
		f.o.claims.WithLabelValues(ev.Pool, coordinator.ResultCanceled).Inc()
	case coordinator.EventSeatExpired, coordinator.EventSeatForceReleased, coordinator.EventSeatReleased:
		sk := seatKey{ev.Pool, ev.Token}
		if t, ok := f.held[sk]; ok {
			delete(f.held, sk)
			f.o.hold.WithLabelValues(ev.Pool).Observe(max(ev.Time.Sub(t), 0).Seconds())
		}
		if reason := ev.LossReason(); reason != "" {
			f.o.seatsLost.WithLabelValues(ev.Pool, reason).Inc()
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
