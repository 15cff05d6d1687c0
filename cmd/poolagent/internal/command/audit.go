package command

import (
	"context"

	"github.com/etcdpool/etcdpool/coordinator"
)

// startAudit starts r.audit, if any, on co's event stream for r.pools
// until ctx ends; the returned channel closes when it has stopped. A write
// that fails stops the audit log, not the agent, and is logged at once.
func (r agentRun) startAudit(ctx context.Context, co *coordinator.Coordinator) <-chan struct{} {
	done := make(chan struct{})
	if r.audit == nil {
		close(done)
		return done
	}
	wait := r.audit.Start(ctx, co, r.pools, r.log)
	go func() {
		defer close(done)
		if err := wait(); err != nil {
			r.log.Error("audit log stopped; restart the agent to resume it", "err", err)
		}
	}()
	return done
}
