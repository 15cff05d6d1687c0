// Package metrics is the Prometheus implementation of coordinator.Metrics,
// plus what poolagent adds: figures derived from the coordinator's event
// stream (claims made by other processes), collectors that read pool,
// instance and agent state on scrape, and the lease keepalive failure
// counter.
//
// There are two kinds of families, so that nothing is counted twice when
// the series of many processes are added up:
//
//   - process families (etcdpool_claims_total, etcdpool_claim_txns_total,
//     etcdpool_grant_wait_seconds, etcdpool_seat_hold_seconds,
//     etcdpool_seats_lost_total, etcdpool_retries_total,
//     etcdpool_retry_wait_seconds_total) count the claims of the process that
//     exports them, each claim in exactly one process (its claimant): sum
//     them across processes;
//   - pool families (etcdpool_pool_*) describe a pool as a watcher of etcd
//     sees it, and every agent that follows the pool exports the same
//     figures: aggregate them with max by (pool), never sum.
//
// Every family is in the etcdpool_ namespace; labels are pool names, results,
// reasons and states, never holder ids.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Namespace prefixes every metric name.
const Namespace = "etcdpool"

// GrantWaitBuckets are the grant-wait histogram buckets, in seconds.
var GrantWaitBuckets = []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

// HoldBuckets are the seat-hold histogram buckets, in seconds: from a seat
// released at once to one held for a day.
var HoldBuckets = []float64{.01, .1, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600}

// Metrics implements coordinator.Metrics with Prometheus counters and
// histograms: the process families. It is safe for concurrent use.
type Metrics struct {
	claimTxns  *prometheus.CounterVec
	claims     *prometheus.CounterVec
	grantWait  *prometheus.HistogramVec
	hold       *prometheus.HistogramVec
	seatsLost  *prometheus.CounterVec
	keepaliveF prometheus.Counter
	sessLost   prometheus.Counter
	waiters    *prometheus.GaugeVec // waiters.go
	retries    retries              // retries.go
}

var _ coordinator.Metrics = (*Metrics)(nil)

// New creates the process families and registers them with reg. It panics
// if they are already registered there, like prometheus.MustRegister.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		claimTxns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "claim_txns_total",
			Help: "Claim transactions sent to etcd by this process."}, []string{"pool"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "claims_total",
			Help: "Finished claims of this process by result: granted, no_seat, canceled, error."}, []string{"pool", "result"}),
		grantWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "grant_wait_seconds",
			Help: "Time claims of this process took from asking for a seat to its grant, queue included.", Buckets: GrantWaitBuckets}, []string{"pool"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "seat_hold_seconds",
			Help: "Time claims of this process held their seats, from the grant to the release or loss.", Buckets: HoldBuckets}, []string{"pool"}),
		seatsLost: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "seats_lost_total",
			Help: "Seats taken from holders in this process, by reason: expired, force_released, instance_gone, pool_deleted, unknown."}, []string{"pool", "reason"}),
		keepaliveF: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "lease_keepalive_failures_total",
			Help: "Keepalive attempts of this process's session leases that failed; a session retries until its deadline."}),
		sessLost: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "sessions_lost_total",
			Help: "Sessions of this process lost before it closed them: lease expired, revoked, or not kept alive in time."}),
	}
	reg.MustRegister(m.claimTxns, m.claims, m.grantWait, m.hold, m.seatsLost, m.keepaliveF, m.sessLost)
	m.waiters = newWaiters(reg)
	m.retries = newRetries(reg)
	return m
}

// ClaimTxn implements coordinator.Metrics.
func (m *Metrics) ClaimTxn(pool string) { m.claimTxns.WithLabelValues(pool).Inc() }

// ClaimResult implements coordinator.Metrics.
func (m *Metrics) ClaimResult(pool, result string) { m.claims.WithLabelValues(pool, result).Inc() }

// GrantWait implements coordinator.Metrics.
func (m *Metrics) GrantWait(pool string, d time.Duration) {
	m.grantWait.WithLabelValues(pool).Observe(d.Seconds())
}

// SeatHold implements coordinator.Metrics.
func (m *Metrics) SeatHold(pool string, d time.Duration) {
	m.hold.WithLabelValues(pool).Observe(max(d, 0).Seconds())
}

// SeatLost implements coordinator.Metrics.
func (m *Metrics) SeatLost(pool, reason string) { m.seatsLost.WithLabelValues(pool, reason).Inc() }

// KeepaliveFailure counts one failed keepalive attempt. It has the
// signature of the hook of coordinator.WithKeepAliveFailure; the error is
// not recorded (it would make the label set unbounded).
func (m *Metrics) KeepaliveFailure(error) { m.keepaliveF.Inc() }

// SessionLost counts one session lost before its owner closed it.
func (m *Metrics) SessionLost() { m.sessLost.Inc() }
