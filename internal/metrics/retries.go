package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// retries are etcdpool_retries_total{pool,op} and
// etcdpool_retry_wait_seconds_total{pool,op}: the coordinator steps this
// process retried after a transient failure or lost contention, by op (a
// coordinator.Retry* constant), and how long they backed off. A process
// family: sum across processes.
type retries struct {
	n    *prometheus.CounterVec
	wait *prometheus.CounterVec
}

func newRetries(reg prometheus.Registerer) retries {
	r := retries{
		n: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "retries_total",
			Help: "Coordinator steps this process retried, by op: claim_read, resolve, release, reap, contention, feed_read, feed_watch, waiting, instance_cas."},
			[]string{"pool", "op"}),
		wait: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "retry_wait_seconds_total",
			Help: "Time this process's coordinator steps backed off before retrying, by op."},
			[]string{"pool", "op"}),
	}
	reg.MustRegister(r.n, r.wait)
	return r
}

// Retry implements coordinator.Metrics.
func (m *Metrics) Retry(pool, op string, wait time.Duration) {
	m.retries.n.WithLabelValues(pool, op).Inc()
	m.retries.wait.WithLabelValues(pool, op).Add(wait.Seconds())
}
