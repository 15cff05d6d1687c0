package coordinator

import "time"

// EventType names what happened.
type EventType string

// Event types.
const (
	EventPoolCreated       EventType = "pool-created"
	EventPoolDeleted       EventType = "pool-deleted"
	EventSpecChanged       EventType = "spec-changed"
	EventSeatClaimed       EventType = "seat-claimed"
	EventSeatReleased      EventType = "seat-released"
	EventSeatExpired       EventType = "seat-expired"
	EventSeatForceReleased EventType = "seat-force-released"
	EventInstanceUp        EventType = "instance-up"
	EventInstanceDraining  EventType = "instance-draining"
	EventInstanceDown      EventType = "instance-down"
	// EventWaiterJoined: a claimant started waiting, in line or held back
	// off it (then Reason says why, a WaitReason). A waiter moving between
	// the two is no event.
	EventWaiterJoined EventType = "waiter-joined"
	// EventWaiterLeft: a waiter was granted a seat, gave up or died.
	EventWaiterLeft EventType = "waiter-left"
	// EventResync says the stream lost history (compaction or a broken
	// watch) and re-listed: events between the last one sent and Revision
	// may be missing, and the stream continues from the new listing.
	EventResync EventType = "resync"
)

// Event is one change in a pool, as seen by Watch. Fields that do not apply
// to a type are zero; Seat is -1 when the event is not about a seat.
type Event struct {
	Type     EventType `json:"type"`
	Pool     string    `json:"pool,omitempty"`
	Seat     int       `json:"seat"`
	Token    int64     `json:"token,omitempty"`
	Holder   string    `json:"holder,omitempty"`
	Tenant   string    `json:"tenant,omitempty"`
	Instance string    `json:"instance,omitempty"`
	// Reason is why a seat was freed, or why a held-back waiter waits.
	Reason   string `json:"reason,omitempty"`
	By       string `json:"by,omitempty"` // who force-released the seat
	Revision int64  `json:"revision"`
	// Time is when the watcher received the event, not when etcd applied it.
	Time time.Time `json:"time"`
}
