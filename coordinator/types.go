package coordinator

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/internal/termsafe"
)

// Bounds on input. They keep keys short, specs small and every pool within
// what one etcd cluster serves comfortably.
const (
	// MaxNameLen bounds pool, instance and tenant names.
	MaxNameLen = 128
	// MaxCapacity bounds a pool's capacity. A seat is one key with one
	// lease binding; a million keys is the upper end of a healthy etcd
	// keyspace (the default quota is 2 GiB).
	MaxCapacity = 1_000_000
	// MaxInstanceSeats bounds the seats one instance serves.
	MaxInstanceSeats = 100_000
	// MinTTL is etcd's minimum lease TTL with default timing; lower TTLs
	// are silently raised by the server, so they are refused here.
	MinTTL = 2 * time.Second
	// MaxTTL bounds seat and session TTLs.
	MaxTTL = 24 * time.Hour
	// DefaultSeatTTL is the seat TTL of a spec that sets none.
	DefaultSeatTTL = 10 * time.Second
	// MaxHolderLen bounds a holder identity, and an instance's agent.
	MaxHolderLen = 256
	// MaxAddrLen bounds an instance's address.
	MaxAddrLen = 1024
)

// PoolSpec is a pool's configuration, stored as JSON in its spec key.
type PoolSpec struct {
	// Capacity is how many seats may be held at once. 1..MaxCapacity.
	Capacity int `json:"capacity"`
	// SeatTTLSeconds is the session TTL claimants of this pool should use.
	// 0 means DefaultSeatTTL; otherwise MinTTL..MaxTTL.
	SeatTTLSeconds int64 `json:"seatTTLSeconds,omitempty"`
	// TenantLimit is how many seats one tenant may hold. 0 means no limit.
	TenantLimit int `json:"tenantLimit,omitempty"`
	// TenantLimits overrides TenantLimit per tenant. 0 denies the tenant.
	TenantLimits map[string]int `json:"tenantLimits,omitempty"`
	// RequireInstance makes every claim bind to a registered instance, even
	// while none is registered (claims then wait or fail). When false, a
	// pool binds seats to instances only while it has some.
	RequireInstance bool `json:"requireInstance,omitempty"`
}

// SeatTTL returns the effective seat TTL.
func (s PoolSpec) SeatTTL() time.Duration {
	if s.SeatTTLSeconds == 0 {
		return DefaultSeatTTL
	}
	return time.Duration(s.SeatTTLSeconds) * time.Second
}

// LimitFor returns the seat limit of tenant t, or 0 when t is unlimited.
// Claims without a tenant are never tenant-limited.
func (s PoolSpec) LimitFor(t string) (limit int, limited bool) {
	if t == "" {
		return 0, false
	}
	if n, ok := s.TenantLimits[t]; ok {
		return n, true
	}
	return s.TenantLimit, s.TenantLimit > 0
}

// Validate checks every field and cross-field rule.
func (s PoolSpec) Validate() error {
	if s.Capacity < 1 || s.Capacity > MaxCapacity {
		return fmt.Errorf("%w: capacity %d is outside 1..%d", ErrInvalid, s.Capacity, MaxCapacity)
	}
	if ttl := s.SeatTTL(); ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: seat TTL %v is outside %v..%v (etcd raises shorter leases)", ErrInvalid, ttl, MinTTL, MaxTTL)
	}
	if s.TenantLimit < 0 || s.TenantLimit > MaxCapacity {
		return fmt.Errorf("%w: tenant limit %d is outside 0..%d", ErrInvalid, s.TenantLimit, MaxCapacity)
	}
	for t, n := range s.TenantLimits {
		if err := ValidateName(t); err != nil {
			return fmt.Errorf("%w: tenant override: %v", ErrInvalid, err)
		}
		if n < 0 || n > MaxCapacity {
			return fmt.Errorf("%w: limit %d for tenant %q is outside 0..%d", ErrInvalid, n, t, MaxCapacity)
		}
	}
	return nil
}

// decodeSpec decodes and validates a spec read from etcd. It never panics;
// every failure wraps ErrBadSpec.
func decodeSpec(pool string, b []byte) (PoolSpec, error) {
	var s PoolSpec
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return PoolSpec{}, &InvalidError{Kind: ErrBadSpec, Reason: fmt.Sprintf("pool %q: %v", pool, err)}
	}
	if dec.More() {
		return PoolSpec{}, &InvalidError{Kind: ErrBadSpec, Reason: fmt.Sprintf("pool %q: trailing data", pool)}
	}
	if err := s.Validate(); err != nil {
		return PoolSpec{}, &InvalidError{Kind: ErrBadSpec, Reason: fmt.Sprintf("pool %q: %v", pool, err)}
	}
	return s, nil
}

// ValidateName checks a pool, instance or tenant name: 1..MaxNameLen
// printable ASCII characters, no '/', no space. Errors wrap ErrInvalid.
func ValidateName(n string) error {
	if n == "" || len(n) > MaxNameLen {
		return fmt.Errorf("%w: name %q must be 1..%d characters", ErrInvalid, shortName(n), MaxNameLen)
	}
	if n == "." || n == ".." {
		return fmt.Errorf("%w: name %q is reserved", ErrInvalid, n)
	}
	for _, r := range n {
		if r <= ' ' || r > '~' || r == '/' {
			return fmt.Errorf("%w: name %q has %q; use printable ASCII without '/' or spaces", ErrInvalid, shortName(n), r)
		}
	}
	return nil
}

// validText checks text that a record stores as written (a holder's name,
// a label, a force-release's reason and author): valid UTF-8. JSON would
// store each byte that is not as U+FFFD, and the record read back would
// not be the one written: longer, or unequal to the value in memory.
// Errors wrap ErrInvalid and say what.
func validText(what, s string) error {
	if !utf8.ValidString(s) {
		return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("%s %q is not valid UTF-8", what, shortName(s))}
	}
	return nil
}

// validHolder checks an identity a record stores: a claim's holder, or
// the author of a release: 1..MaxHolderLen bytes of valid UTF-8.
func validHolder(what, s string) error {
	if s == "" || len(s) > MaxHolderLen {
		return fmt.Errorf("%w: %s must be 1..%d bytes", ErrInvalid, what, MaxHolderLen)
	}
	return validText(what, s)
}

// validLabels checks a label set, an instance's or a selector's: keys of
// 1..MaxNameLen bytes, keys and values valid UTF-8.
func validLabels(labels map[string]string) error {
	for k, v := range labels {
		if k == "" || len(k) > MaxNameLen {
			return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("bad label key %q", shortName(k))}
		}
		if err := validText("label key", k); err != nil {
			return err
		}
		if err := validText(fmt.Sprintf("label %q value", k), v); err != nil {
			return err
		}
	}
	return nil
}

// shortName cuts a name to 64 bytes for an error message, so that a huge
// or hostile input is not echoed whole.
func shortName(n string) string {
	if len(n) <= 64 {
		return n
	}
	return n[:64] + fmt.Sprintf("…(%d bytes)", len(n))
}

// Pool is a pool's spec as read from etcd.
type Pool struct {
	Name string
	Spec PoolSpec
	// Revision is the spec key's mod revision; UpdatePool compares it.
	Revision int64
}

// InstanceState is an instance's admission state.
type InstanceState string

// Instance states.
const (
	// InstanceReady admits new claims.
	InstanceReady InstanceState = "ready"
	// InstanceDraining admits no new claims; held seats stay.
	InstanceDraining InstanceState = "draining"
)

// Instance is a worker registered by an agent, bound to the agent's lease.
type Instance struct {
	// ID names the instance within its pool.
	ID string `json:"id"`
	// Addr is where claimants reach the worker. Free-form, may be empty.
	Addr string `json:"addr,omitempty"`
	// Labels are matched by claims that ask for labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Seats is how many claims the instance serves at once. Default 1
	// (exclusive); 1..MaxInstanceSeats.
	Seats int `json:"seats"`
	// State is ready or draining. Default ready.
	State InstanceState `json:"state"`
	// Agent names the registering agent. Informational.
	Agent string `json:"agent,omitempty"`
	// Stopping is true while the agent that holds the instance drains it
	// because it stops: SetInstanceStateIfOwner took it from ready to
	// draining. Another agent with the instance in its configuration may
	// then take it over, its holders keeping their seats (an undone
	// rollout). An operator's write (SetInstanceState: poolctl drain or
	// undrain) clears it, as does making the instance ready.
	Stopping bool `json:"stopping,omitempty"`
	// Epoch and Started order the agents that register instances. Epoch
	// is the etcd revision the registering agent process read as it first
	// registered an instance, so that an agent started after another has
	// written its registrations has a higher one, whatever the hosts'
	// clocks say; 0 when not known (written by an older etcdpool). Started
	// is when that process started, by its host's clock: it orders two
	// agents of one epoch (no write to etcd came between their starts).
	// The agent package takes an instance over from another agent only
	// when that agent is the older, so the newer of two agents keeps it
	// (see its owner rule for epoch 0).
	Epoch   int64     `json:"epoch,omitempty"`
	Started time.Time `json:"started,omitzero"`

	// Lease is the agent's lease; set on read.
	Lease clientv3.LeaseID `json:"-"`
	// Revision is the key's mod revision; set on read.
	Revision int64 `json:"-"`
}

// AgentStopping reports whether the instance's agent drains it to stop
// (Stopping, while it drains): the one rule for whether another agent may
// take it over for that reason.
func (in Instance) AgentStopping() bool { return in.Stopping && in.State == InstanceDraining }

func (in *Instance) defaults() {
	if in.Seats == 0 {
		in.Seats = 1
	}
	if in.State == "" {
		in.State = InstanceReady
	}
}

func (in Instance) validate() error {
	if err := ValidateName(in.ID); err != nil {
		return fmt.Errorf("instance id: %w", err)
	}
	if in.Seats < 1 || in.Seats > MaxInstanceSeats {
		return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("instance %q seats %d outside 1..%d", in.ID, in.Seats, MaxInstanceSeats)}
	}
	if in.State != InstanceReady && in.State != InstanceDraining {
		return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("instance %q state %q is not ready|draining", in.ID, in.State)}
	}
	if err := validLabels(in.Labels); err != nil {
		return fmt.Errorf("instance %q: %w", in.ID, err)
	}
	if in.Epoch < 0 {
		return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("instance %q epoch %d is negative", in.ID, in.Epoch)}
	}
	return nil
}

// ValidateInstanceAddr checks an instance's address as RegisterInstance
// and TakeOverInstance take it: at most MaxAddrLen bytes of printable text
// (no control or invisible characters: termsafe). Claimants pass it on, to
// a command's environment (poolctl run), where a NUL cannot go, and
// operators read it. It is free-form otherwise. Readers take what another
// client wrote, as the library does for every stored text.
func ValidateInstanceAddr(s string) error { return writableText("address", s, MaxAddrLen) }

// ValidateAgentName checks the agent name an instance records, as
// RegisterInstance and TakeOverInstance take it: at most MaxHolderLen
// bytes of printable text.
func ValidateAgentName(s string) error { return writableText("agent name", s, MaxHolderLen) }

func writableText(what, s string, max int) error {
	if len(s) > max {
		return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("%s is %d bytes, more than %d", what, len(s), max)}
	}
	if err := validText(what, s); err != nil {
		return err
	}
	if err := termsafe.Check(s); err != nil {
		return &InvalidError{Kind: ErrInvalid, Reason: fmt.Sprintf("%s %q: %v", what, shortName(s), err)}
	}
	return nil
}

// Matches reports whether the instance carries every label in sel, each
// with its value: a label asked for with an empty value must be there,
// empty (an instance without it does not match).
func (in Instance) Matches(sel map[string]string) bool {
	for k, v := range sel {
		if got, ok := in.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// seatRecord is the JSON value of a seat key.
type seatRecord struct {
	Holder    string    `json:"holder"`
	Tenant    string    `json:"tenant,omitempty"`
	Instance  string    `json:"instance,omitempty"`
	Nonce     uint64    `json:"nonce"`
	ClaimedAt time.Time `json:"claimedAt"`
	// TenantSlot and BindSlot name the slot keys taken with the seat; -1
	// when none. Releases delete exactly these, fenced by the token.
	TenantSlot int `json:"tenantSlot"`
	BindSlot   int `json:"bindSlot"`
}

// Seat is a held seat as seen by an observer.
type Seat struct {
	Pool     string `json:"pool"`
	Seat     int    `json:"seat"`
	Holder   string `json:"holder"`
	Tenant   string `json:"tenant,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Token is the fencing token: the seat key's create revision.
	Token     int64            `json:"token"`
	Lease     clientv3.LeaseID `json:"lease"`
	ClaimedAt time.Time        `json:"claimedAt"`
	// TTL is the lease time left as the server reported it; -1 if unknown.
	TTL time.Duration `json:"ttl"`

	tenantSlot, bindSlot int    // from the seat record; ForceRelease needs them
	claim                string // the holding claim's <lease>-<nonce>, from the key
}

// waiterRecord is the JSON value of a queue key.
type waiterRecord struct {
	Holder   string            `json:"holder"`
	Tenant   string            `json:"tenant,omitempty"`
	Instance string            `json:"instance,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Since    time.Time         `json:"since"`
}

// Waiter is one claimant waiting for a seat of a pool: in line (its queue
// key) or held back off the line by its own tenant limit or instance
// selector (its waiting record).
type Waiter struct {
	Pool string `json:"pool"`
	// Position is the place in line, 0 for the head; -1 for a waiter held
	// back off the line.
	Position int               `json:"position"`
	Holder   string            `json:"holder"`
	Tenant   string            `json:"tenant,omitempty"`
	Instance string            `json:"instance,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Lease    clientv3.LeaseID  `json:"lease"`
	Since    time.Time         `json:"since"`
	// Revision is the create revision of the queue key or waiting record.
	Revision int64 `json:"revision"`
	// Reason is why it waits, as the planner sees it at the read's
	// revision: for the head, what keeps it from a seat; for a waiter
	// behind it, what bars it on its own, else WaitQueue. Empty when a free
	// seat is about to be granted to it.
	Reason WaitReason `json:"reason"`
	// Detail says Reason for people.
	Detail string `json:"detail,omitempty"`
	// Ahead is how many claimants stand ahead of it in line (its
	// Position); 0 for a waiter held back.
	Ahead int `json:"ahead"`
}

// Status returns the waiter's WaitStatus, as the waiter itself reports it.
func (w Waiter) Status() WaitStatus {
	return WaitStatus{Reason: w.Reason, Detail: w.Detail, Ahead: w.Ahead, InLine: w.Position >= 0}
}

// releaseRecord is the JSON value of a released key: who freed the seat
// last, and why. Holders read it to tell a force-release from an expiry.
type releaseRecord struct {
	Token  int64     `json:"token"`
	Forced bool      `json:"forced"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

// PoolStatus summarises one pool.
type PoolStatus struct {
	Name     string   `json:"name"`
	Spec     PoolSpec `json:"spec"`
	Revision int64    `json:"revision"`
	Held     int      `json:"held"`
	Free     int      `json:"free"`
	// Waiting counts every waiter: in line and held back off it.
	Waiting   int `json:"waiting"`
	Instances int `json:"instances"`
	// SpecError is set when the spec in etcd is malformed.
	SpecError string `json:"specError,omitempty"`
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
