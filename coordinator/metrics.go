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
}

// NoopMetrics discards everything. It is the default.
type NoopMetrics struct{}

// ClaimTxn implements Metrics.
func (NoopMetrics) ClaimTxn(string) {}

// ClaimResult implements Metrics.
func (NoopMetrics) ClaimResult(string, string) {}

// GrantWait implements Metrics.
func (NoopMetrics) GrantWait(string, time.Duration) {}

// SeatLost implements Metrics.
func (NoopMetrics) SeatLost(string, string) {}
