package coordinator_test

import (
	"context"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// chaosInstances are the chaos pool's instances: 3 seats in all, one of
// them exclusive, so at capacity 4 the instances, not the pool's capacity,
// bound the grants, and every grant binds a seat that the history replay
// checks against its instance. Some claimants select i1 by name, and some
// i2 by its label (spawn).
var chaosInstances = []coordinator.Instance{
	{ID: "i1", Seats: 1, Labels: map[string]string{"zone": "a"}},
	{ID: "i2", Seats: 2, Labels: map[string]string{"zone": "b"}},
}

// chaosAgentTTL is the agent's session TTL: longer than an election, so
// that leader faults alone do not take the instances away (a leader change
// refreshes leases, etcd#9888).
const chaosAgentTTL = 10 * time.Second

// agent keeps the chaos pool's instances registered, as a poolagent
// would, under a session of its own in the test process; when that
// session ends (its lease lost across etcd faults), it registers them
// again under a new one. registered is closed once they are first
// registered. It returns when ctx ends, closing its session.
func (ch *chaos) agent(ctx context.Context, registered chan<- struct{}) {
	first := true
	for ctx.Err() == nil {
		s, err := coordinator.NewSession(ctx, ch.cli, coordinator.WithTTL(chaosAgentTTL))
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		for _, in := range chaosInstances {
			// Refused while the key is still bound to the lease of an
			// earlier session, not yet expired on the server.
			for ctx.Err() == nil && s.Err() == nil {
				if _, err := ch.c.RegisterInstance(ctx, "p", s.Lease(), in); err == nil {
					break
				}
				sleepCtx(ctx, 100*time.Millisecond)
			}
		}
		if first && s.Err() == nil && ctx.Err() == nil {
			first = false
			close(registered)
		}
		select {
		case <-ctx.Done():
		case <-s.Done():
			ch.fault("agent-lease-lost")
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Close(cctx)
		cancel()
	}
}
