package cli

import "time"

// The JSON schema of -o json (and -o yaml, which uses the same names). It
// is stable: fields are only ever added. Every field is always present;
// empty lists are [], unknown durations are -1. Tokens and revisions are
// numbers, lease IDs are hex strings as etcdctl prints them, times are
// RFC 3339 in UTC, durations are whole seconds.

// poolView is one pool's spec (pool create, get, set).
type poolView struct {
	Name            string         `json:"name"`
	Capacity        int            `json:"capacity"`
	SeatTTLSeconds  int64          `json:"seatTTLSeconds"` // effective TTL
	TenantLimit     int            `json:"tenantLimit"`    // 0: none
	TenantLimits    map[string]int `json:"tenantLimits"`   // per-tenant overrides
	RequireInstance bool           `json:"requireInstance"`
	Revision        int64          `json:"revision"` // the spec's mod revision
}

// poolListView is pool list and status.
type poolListView struct {
	Pools []poolStatusView `json:"pools"`
}

// poolStatusView is one pool's spec and usage.
type poolStatusView struct {
	Name            string  `json:"name"`
	Capacity        int     `json:"capacity"`
	SeatTTLSeconds  int64   `json:"seatTTLSeconds"`
	TenantLimit     int     `json:"tenantLimit"`
	RequireInstance bool    `json:"requireInstance"`
	Held            int     `json:"held"`
	Free            int     `json:"free"`
	Waiting         int     `json:"waiting"`
	Instances       int     `json:"instances"`
	Utilization     float64 `json:"utilization"` // held/capacity; may exceed 1 after a shrink
	SpecError       string  `json:"specError"`   // set when the spec in etcd is malformed
}

// poolDeleteView is pool delete.
type poolDeleteView struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
	Forced  bool   `json:"forced"`
}

// seatListView is seats.
type seatListView struct {
	Pool  string     `json:"pool"`
	Seats []seatView `json:"seats"`
}

// seatView is one held seat.
type seatView struct {
	Seat       int       `json:"seat"`
	Holder     string    `json:"holder"`
	Tenant     string    `json:"tenant"`
	Instance   string    `json:"instance"`
	Token      int64     `json:"token"`
	Lease      string    `json:"lease"`
	ClaimedAt  time.Time `json:"claimedAt"`
	AgeSeconds int64     `json:"ageSeconds"`
	TTLSeconds int64     `json:"ttlSeconds"` // lease time left; -1 if unknown
}

// instanceListView is instances.
type instanceListView struct {
	Pool      string         `json:"pool"`
	Instances []instanceView `json:"instances"`
}

// instanceView is one registered instance.
type instanceView struct {
	ID     string            `json:"id"`
	State  string            `json:"state"` // ready or draining
	Seats  int               `json:"seats"` // claims it serves at once
	Held   int               `json:"held"`  // seats bound to it now
	Addr   string            `json:"addr"`
	Labels map[string]string `json:"labels"`
	Agent  string            `json:"agent"`
	Lease  string            `json:"lease"`
}

// instanceStateView is drain and undrain.
type instanceStateView struct {
	Pool     string `json:"pool"`
	Instance string `json:"instance"`
	State    string `json:"state"`
}

// queueView is queue.
type queueView struct {
	Pool    string       `json:"pool"`
	Waiters []waiterView `json:"waiters"`
}

// waiterView is one waiter; position 0 is served next, -1 is held back
// off the line by its own tenant limit or instance selector.
type waiterView struct {
	Position      int               `json:"position"`
	Holder        string            `json:"holder"`
	Tenant        string            `json:"tenant"`
	Instance      string            `json:"instance"`
	Labels        map[string]string `json:"labels"`
	Lease         string            `json:"lease"`
	Since         time.Time         `json:"since"`
	WaitedSeconds int64             `json:"waitedSeconds"`
	Reason        string            `json:"reason"` // a coordinator.WaitReason; "" while being granted
	Detail        string            `json:"detail"`
	Ahead         int               `json:"ahead"`
}

// releaseView is release: the seat as it was when released.
type releaseView struct {
	Pool     string `json:"pool"`
	Seat     int    `json:"seat"`
	Token    int64  `json:"token"`
	Holder   string `json:"holder"`
	Tenant   string `json:"tenant"`
	Instance string `json:"instance"`
	Reason   string `json:"reason"`
}

// eventView is one watch event (one JSON line).
type eventView struct {
	Type     string    `json:"type"`
	Pool     string    `json:"pool"`
	Seat     int       `json:"seat"` // -1 when not about a seat
	Token    int64     `json:"token"`
	Holder   string    `json:"holder"`
	Tenant   string    `json:"tenant"`
	Instance string    `json:"instance"`
	Reason   string    `json:"reason"`
	Revision int64     `json:"revision"`
	Time     time.Time `json:"time"` // see timeSource
	// TimeSource is "record" when time is the record's own timestamp
	// (seat-claimed, seat-released, seat-force-released, waiter-joined),
	// "received" when it is when poolctl received the event, "replayed"
	// when that was while --rev replayed history (the time then says
	// nothing about when the event happened).
	TimeSource string `json:"timeSource"`
	// Changes is what a spec-changed event changed; [] otherwise.
	Changes []specChangeView `json:"changes"`
}

// versionView is version.
type versionView struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// roleView is roles: one actor's role.
type roleView struct {
	Role        string         `json:"role"`
	Actor       string         `json:"actor"`
	Pool        string         `json:"pool"` // "" for operator and viewer
	Permissions []rolePermView `json:"permissions"`
	Commands    []string       `json:"commands"` // etcdctl commands that create it
	Applied     bool           `json:"applied"`  // --apply created it
}

// rolePermView is one permission of a role.
type rolePermView struct {
	Type   string `json:"type"` // read or readwrite
	Key    string `json:"key"`
	Prefix bool   `json:"prefix"`
}

// doctorView is doctor: what it found under Prefix.
type doctorView struct {
	Prefix   string              `json:"prefix"`
	Findings []doctorFindingView `json:"findings"`
}

// doctorFindingView is one key doctor found.
type doctorFindingView struct {
	Key     string `json:"key"`
	Problem string `json:"problem"`
	Fixable bool   `json:"fixable"` // --fix deletes it
	Action  string `json:"action"`  // with --fix: deleted, or why it was left; else ""
}
