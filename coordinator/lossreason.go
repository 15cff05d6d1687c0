package coordinator

import "errors"

// LossReason maps the error a Claim ended with (Claim.Err, or an error
// wrapping it) to one of the Reason constants: ReasonReleased,
// ReasonExpired, ReasonForceReleased, ReasonInstanceGone,
// ReasonPoolDeleted, or ReasonUnknown for anything else. It is the mapping
// the coordinator itself reports to Metrics.SeatLost, so a sidecar's seat
// file, the logs and the metrics name a loss alike.
func LossReason(err error) string { return reasonOf(err) }

func reasonOf(err error) string {
	switch {
	case errors.Is(err, ErrReleased):
		return ReasonReleased
	case errors.Is(err, ErrSessionExpired):
		return ReasonExpired
	case errors.Is(err, ErrForceReleased):
		return ReasonForceReleased
	case errors.Is(err, ErrInstanceGone):
		return ReasonInstanceGone
	case errors.Is(err, ErrPoolDeleted):
		return ReasonPoolDeleted
	}
	return ReasonUnknown
}

// LossReason maps a seat event to the reason its holder lost the seat, or
// "" when the seat was not lost: a claim, a plain release, or an event that
// is not about a seat. An expired seat is ReasonExpired, a force-release
// ReasonForceReleased, and a release that a holder made because its
// instance went, or that deleting the pool made, carries ReasonInstanceGone
// or ReasonPoolDeleted (see seatEvent, which sets Reason).
func (e Event) LossReason() string {
	switch e.Type {
	case EventSeatExpired:
		return ReasonExpired
	case EventSeatForceReleased:
		return ReasonForceReleased
	case EventSeatReleased:
		if e.Reason == ReasonInstanceGone || e.Reason == ReasonPoolDeleted {
			return e.Reason
		}
	}
	return ""
}
