package coordinator

import "time"

// Claim results reported to Metrics.ClaimResult.
const (
	ResultGranted  = "granted"
	ResultNoSeat   = "no_seat"
	ResultCanceled = "canceled"
	ResultError    = "error"
)

// Seat loss reasons reported to Metrics.SeatLost and carried by events.
const (
	ReasonReleased      = "released"
	ReasonExpired       = "expired"
	ReasonForceReleased = "force_released"
	ReasonInstanceGone  = "instance_gone"
	ReasonPoolDeleted   = "pool_deleted"
	ReasonUnknown       = "unknown"
)

// Metrics receives the figures an operator wants. Implementations must be
// safe for concurrent use and cheap: they are called on the claim path.
// Labels are pool names and the constants above, never holder ids.
type Metrics interface {
	// ClaimTxn counts one claim transaction sent to etcd.
	ClaimTxn(pool string)
	// ClaimResult counts one finished Claim call by result.
	ClaimResult(pool, result string)
	// GrantWait observes how long a granted claim waited, queue included.
	GrantWait(pool string, d time.Duration)
	// SeatLost counts a seat a holder lost, by reason (not ReasonReleased).
	SeatLost(pool, reason string)
	// SeatHold observes how long a claim held its seat, from the grant
	// (the seat record's claimedAt, so an adopted claim counts from its
	// first grant) to its release or loss, whatever the reason. It is
	// called once per claim that ends while this process holds it.
	SeatHold(pool string, d time.Duration)
	// Waiting adds delta (+1 or -1) to this process's claimants waiting on
	// pool for reason, a WaitReason; a waiter whose reason changes moves
	// from one reason to the other.
	Waiting(pool, reason string, delta int)
	// Retry counts one retry of a coordinator step on pool, by op (a
	// Retry* constant), after it failed for a transient reason or lost to
	// contention; wait is how long it backed off first (0 for a pool feed
	// that reconnects at once).
	Retry(pool, op string, wait time.Duration)
}

// The steps Metrics.Retry names. Each retries on its own policy
// (retry.go).
const (
	RetryClaimRead  = "claim_read"   // a claimant's read of the pool
	RetryResolve    = "resolve"      // fencing and reading after an ambiguous claim txn
	RetryRelease    = "release"      // a release whose answer was lost
	RetryReap       = "reap"         // cleanup after an ambiguous claim whose caller has gone
	RetryContention = "contention"   // a claim txn that lost to other claimants, from its third try
	RetryFeedRead   = "feed_read"    // the pool feed's read, after etcd failed it
	RetryFeedWatch  = "feed_watch"   // the pool feed's watch broke (an election, a lost connection, a compaction)
	RetryWaiting    = "waiting"      // a held-back waiter's waiting record
	RetryInstance   = "instance_cas" // SetInstanceState's read-modify-write, lost to the agent's own write
)

// NoopMetrics discards everything. It is the default. Embed it in your own
// implementation to keep compiling when hooks are added.
type NoopMetrics struct{}

// ClaimTxn implements Metrics.
func (NoopMetrics) ClaimTxn(string) {}

// ClaimResult implements Metrics.
func (NoopMetrics) ClaimResult(string, string) {}

// GrantWait implements Metrics.
func (NoopMetrics) GrantWait(string, time.Duration) {}

// SeatLost implements Metrics.
func (NoopMetrics) SeatLost(string, string) {}

// SeatHold implements Metrics.
func (NoopMetrics) SeatHold(string, time.Duration) {}

// Waiting implements Metrics.
func (NoopMetrics) Waiting(string, string, int) {}

// Retry implements Metrics.
func (NoopMetrics) Retry(string, string, time.Duration) {}
