package metrics

import "github.com/prometheus/client_golang/prometheus"

// newWaiters is etcdpool_waiters{pool,reason}: this process's claimants
// waiting for a seat, by why they wait (a coordinator.WaitReason:
// pool_full, queue, tenant_limit, no_matching_instance, instances_full).
// Each claimant process counts its own waiters: sum across processes.
func newWaiters(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "waiters",
		Help: "Claimants of this process waiting for a seat, by reason: pool_full, queue, tenant_limit, no_matching_instance, instances_full."},
		[]string{"pool", "reason"})
	reg.MustRegister(g)
	return g
}

// Waiting implements coordinator.Metrics.
func (m *Metrics) Waiting(pool, reason string, delta int) {
	m.waiters.WithLabelValues(pool, reason).Add(float64(delta))
}
