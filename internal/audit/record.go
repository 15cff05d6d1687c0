package audit

import "github.com/etcdpool/etcdpool/coordinator"

// TypeGap is the type of a record saying that events were missed.
const TypeGap coordinator.EventType = "gap"

// Record is one line of the audit log: a coordinator event (type, pool,
// seat, token, holder, tenant, instance, reason, by, revision, time), or
// a gap.
type Record struct {
	coordinator.Event
	// MissingFrom and MissingTo bound, inclusive, the revisions a gap
	// record says were compacted before the log read them.
	MissingFrom int64 `json:"missingFrom,omitempty"`
	MissingTo   int64 `json:"missingTo,omitempty"`
	// Note explains a gap in words.
	Note string `json:"note,omitempty"`
}

// recorded reports whether events of type t go to the audit log.
func recorded(t coordinator.EventType) bool {
	switch t {
	case coordinator.EventWaiterJoined, coordinator.EventWaiterLeft, coordinator.EventResync:
		return false
	}
	return true
}
