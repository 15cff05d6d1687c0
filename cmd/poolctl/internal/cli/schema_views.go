package cli

// More of the -o json schema (see schema.go for its rules), for describe
// and for watch's spec-changed events.

// describeView is describe: a pool's spec, usage, instances, seats and
// queue. The four lists are read one after another, not at one revision.
type describeView struct {
	Name      string         `json:"name"`
	Spec      poolView       `json:"spec"`      // as pool get prints it
	SpecError string         `json:"specError"` // set when the spec in etcd is malformed
	Usage     usageView      `json:"usage"`
	Instances []instanceView `json:"instances"`
	Seats     []seatView     `json:"seats"`
	Waiters   []waiterView   `json:"waiters"`
}

// usageView is a pool's usage.
type usageView struct {
	Held        int     `json:"held"`
	Free        int     `json:"free"`
	Waiting     int     `json:"waiting"`
	Utilization float64 `json:"utilization"` // held/capacity; may exceed 1 after a shrink
}

// specChangeView is one field of a spec that a spec-changed event changed.
type specChangeView struct {
	// Field is capacity, seatTTL, tenantLimit, tenantLimits.<tenant> or
	// requireInstance.
	Field string `json:"field"`
	// Old and New are the values as pool get shows them: "none" for no
	// tenant limit, "default" for no override, "yes"/"no".
	Old string `json:"old"`
	New string `json:"new"`
}
