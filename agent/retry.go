package agent

import (
	"time"

	"github.com/etcdpool/etcdpool/internal/retry"
)

// The agent's and sidecar's retry loops, each with the reason for its
// numbers. All of them back off through internal/retry (jittered ±50%).
var (
	// regainPolicy paces hold's re-registrations after instances are
	// deleted under a live lease: a lone deletion is repaired within a few
	// hundred milliseconds, while deletions that keep coming (an operator
	// or a script fighting the agent) are met at most every ~5 s, so the
	// agent never turns them into a write storm.
	regainPolicy = retry.Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second}

	// reachPolicy paces requests that wait for etcd to be reachable (lease
	// grant, pool creation, a new session after one was lost while
	// queued). The cap is MaxReconnectDelay (2 s): retrying more
	// often than the client reconnects only repeats the same failure, and
	// less often delays recovery after an outage.
	reachPolicy = retry.Policy{Initial: 100 * time.Millisecond, Max: MaxReconnectDelay}

	// drainPolicy paces markDraining's compare-and-swap against a
	// concurrent change of the instance key (an operator's poolctl
	// drain): the conflict clears as soon as the key is re-read, and the
	// whole loop must fit in one request timeout at shutdown, so delays
	// stay short.
	drainPolicy = retry.Policy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}

	// resumePolicy paces a restarted sidecar's resume of its lease and
	// seat. The lease runs down meanwhile (MinTTL is 2 s), so the cap of
	// 1 s leaves at least one more try inside the shortest lease.
	resumePolicy = retry.Policy{Initial: 50 * time.Millisecond, Max: time.Second}
)
