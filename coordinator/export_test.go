package coordinator

import (
	"context"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// FeedSynced reports whether c runs a synced feed of pool (feed.go): its
// shared state of the pool is then exact.
func FeedSynced(c *Coordinator, pool string) bool {
	return c.shared(pool).current()
}

// FeedAt reports whether c's pool feed is synced and its view has caught
// up with revision rev.
func FeedAt(c *Coordinator, pool string, rev int64) bool {
	sh := c.shared(pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.exact() && sh.st.rev >= rev
}

// CachedPools is how many pools c keeps a cached state for.
func CachedPools(c *Coordinator) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.states)
}

// HandoffDenied reports whether c's releases on pool now go without a
// hand-off, etcd having refused one for good (deniedHandoff).
func HandoffDenied(c *Coordinator, pool string) bool {
	sh := c.shared(pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.handoffDeniedNow(time.Now())
}

// ViewsWaiter reports whether c's shared state of pool shows a queue key of
// lease.
func ViewsWaiter(c *Coordinator, pool string, lease clientv3.LeaseID) bool {
	sh := c.shared(pool)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for key := range sh.st.queue {
		if pk, err := c.k.parse(key); err == nil && leaseOfHex(pk.Name) == lease {
			return true
		}
	}
	return false
}

// FeedRunning reports whether c runs a feed of pool, synced or not.
func FeedRunning(c *Coordinator, pool string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.feeds[pool]
	return ok
}

// FeedLinger and MaxFedHolders are feed.go's constants.
const (
	FeedLinger    = feedLinger
	MaxFedHolders = maxFedHolders
)

// WaitAfterForget waits for a seat of pool as a Claim WithWait does, right
// after c forgot its view of the pool (forgetMissing, as after another
// claimant found the pool missing): the wait starts on a view not loaded.
func WaitAfterForget(ctx context.Context, c *Coordinator, s *Session, pool string) (*Claim, error) {
	c.forgetMissing(pool)
	return c.wait(ctx, s, pool, claimRequest{opts: claimOptions{holder: "t", wait: true}, lease: s.Lease(), nonce: s.names.take(), spoiled: new(atomic.Bool)})
}
