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
}

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
