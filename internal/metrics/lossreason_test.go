package metrics

import (
	"errors"
	"fmt"
	"testing"

	"github.com/etcdpool/etcdpool/coordinator"
)

// TestLossReasons pins the reason label values that seats_lost_total,
// the coordinator's own SeatLost and the sidecar's seat file share: one
// mapping in coordinator, from a Claim's error and from a seat event.
func TestLossReasons(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: lease 7", coordinator.ErrSessionExpired), coordinator.ReasonExpired},
		{fmt.Errorf("%w: by ops: maintenance", coordinator.ErrForceReleased), coordinator.ReasonForceReleased},
		{coordinator.ErrInstanceGone, coordinator.ReasonInstanceGone},
		{coordinator.ErrPoolDeleted, coordinator.ReasonPoolDeleted},
		{coordinator.ErrReleased, coordinator.ReasonReleased},
		{errors.New("something else"), coordinator.ReasonUnknown},
	} {
		if got := coordinator.LossReason(tc.err); got != tc.want {
			t.Errorf("LossReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ev   coordinator.Event
		want string
	}{
		{coordinator.Event{Type: coordinator.EventSeatExpired, Reason: coordinator.ReasonExpired}, coordinator.ReasonExpired},
		{coordinator.Event{Type: coordinator.EventSeatForceReleased, Reason: "maintenance"}, coordinator.ReasonForceReleased},
		{coordinator.Event{Type: coordinator.EventSeatReleased, Reason: coordinator.ReasonInstanceGone}, coordinator.ReasonInstanceGone},
		{coordinator.Event{Type: coordinator.EventSeatReleased, Reason: coordinator.ReasonPoolDeleted}, coordinator.ReasonPoolDeleted},
		{coordinator.Event{Type: coordinator.EventSeatReleased}, ""},
		{coordinator.Event{Type: coordinator.EventSeatClaimed}, ""},
	} {
		if got := tc.ev.LossReason(); got != tc.want {
			t.Errorf("%+v.LossReason() = %q, want %q", tc.ev, got, tc.want)
		}
	}
}
