package metrics

import "github.com/prometheus/client_golang/prometheus"

// AgentState is what an agent's health endpoints report, as gauges.
type AgentState struct {
	// Ready is what /readyz reports: every instance registered under the
	// agent's lease, none held by another agent, not draining.
	Ready bool
	// LeaseAlive is true while the agent's lease is kept alive.
	LeaseAlive bool
}

// RegisterAgent registers etcdpool_agent_ready and
// etcdpool_agent_lease_alive with reg; both read state on every scrape.
// They let an alert see an agent that is up but not ready, which the
// scrape's own up series cannot.
func RegisterAgent(reg prometheus.Registerer, state func() AgentState) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "agent_ready",
			Help: "1 while this agent is ready (/readyz): its instances registered under its lease, none held by another agent, not draining."},
			func() float64 { return b(state().Ready) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: "agent_lease_alive",
			Help: "1 while this agent's lease is kept alive."},
			func() float64 { return b(state().LeaseAlive) }),
	)
}
