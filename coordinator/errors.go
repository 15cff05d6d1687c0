package coordinator

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is; they are wrapped with context.
var (
	// ErrInvalid reports bad input: a name, a spec, an option.
	ErrInvalid = errors.New("coordinator: invalid argument")
	// ErrPoolNotFound reports that the pool has no spec key.
	ErrPoolNotFound = errors.New("coordinator: pool not found")
	// ErrPoolExists reports that CreatePool found the pool already there.
	ErrPoolExists = errors.New("coordinator: pool already exists")
	// ErrPoolInUse reports that DeletePool found held seats or waiters and
	// was not forced.
	ErrPoolInUse = errors.New("coordinator: pool has held seats or waiters")
	// ErrBadSpec reports a spec in etcd that cannot be decoded or is
	// invalid, for example one written by hand with etcdctl.
	ErrBadSpec = errors.New("coordinator: malformed pool spec in etcd")
	// ErrForeignKey reports a key under a pool's prefix that etcdpool did
	// not write (for example put by hand). Claims on the pool refuse to run
	// until it is deleted, rather than guess what it means.
	ErrForeignKey = errors.New("coordinator: foreign key under pool prefix")
	// ErrConflict reports that a compare-and-swap lost to a concurrent
	// change, for example UpdatePool with a stale revision.
	ErrConflict = errors.New("coordinator: concurrent modification")
	// ErrNoSeat reports that a claim without wait found no seat it could
	// take now: the pool, its tenant or its instances are full, or others
	// are already waiting (a claim never jumps the queue).
	ErrNoSeat = errors.New("coordinator: no seat available")
	// ErrInstanceNotFound reports that a named instance is not registered.
	ErrInstanceNotFound = errors.New("coordinator: instance not found")
	// ErrSeatNotFound reports that a seat is not held by anyone.
	ErrSeatNotFound = errors.New("coordinator: seat not held")
	// ErrStaleToken reports that a seat is held under a different token
	// than the one given; nothing was changed.
	ErrStaleToken = errors.New("coordinator: stale token")
	// ErrNotHeld reports that a release found the claim already gone:
	// released before, force-released, or expired. Nothing was deleted.
	ErrNotHeld = errors.New("coordinator: seat not held by this claim")
	// ErrSessionExpired reports that the claimant's session lease is gone
	// or presumed gone by the local deadline.
	ErrSessionExpired = errors.New("coordinator: session expired")
	// ErrLocalDeadline comes wrapped with ErrSessionExpired when the
	// session ended at its local deadline, no keepalive answered in time:
	// the server cannot expire its lease, nor grant its seats again, for
	// at least the session's margin after that (Session). A session whose
	// lease the server says is gone has no such time left.
	ErrLocalDeadline = errors.New("local deadline passed")
	// ErrLeaseEnding is wrapped, with ErrSessionExpired, by BorrowSession
	// on a lease that is alive but has no more than the margin left: too
	// little to hold a seat on. Unlike a lease that is gone, its owner may
	// still renew it.
	ErrLeaseEnding = errors.New("lease alive, but ending within the margin")
	// ErrForceReleased reports that an operator force-released the seat.
	ErrForceReleased = errors.New("coordinator: seat force-released")
	// ErrInstanceGone reports that the instance a seat was bound to was
	// deregistered or its agent's lease expired.
	ErrInstanceGone = errors.New("coordinator: instance gone")
	// ErrPoolDeleted reports that the pool was deleted while a seat was held.
	ErrPoolDeleted = errors.New("coordinator: pool deleted")
	// ErrSeatLost reports that the seat key vanished for a reason that could
	// not be pinned down (for example deleted by hand with etcdctl).
	ErrSeatLost = errors.New("coordinator: seat lost")
	// ErrReleased is the Err of a claim that its holder released.
	ErrReleased = errors.New("coordinator: seat released")
	// ErrClosed reports use of a closed Session or Coordinator.
	ErrClosed = errors.New("coordinator: closed")
	// ErrNotInstance is the Cause of an InvalidError for a value under
	// an instance key that is no instance record of that ID at all (not
	// a JSON object naming that ID), as against a record of it that this
	// version does not accept or cannot decode whole, which a newer
	// etcdpool may have written.
	ErrNotInstance = errors.New("coordinator: not an instance record")
)

// WaitReason says why a claim cannot be granted now.
type WaitReason string

// The reasons a claim waits or is refused with ErrNoSeat.
const (
	// WaitPoolFull: every seat of the pool is held.
	WaitPoolFull WaitReason = "pool_full"
	// WaitQueue: other claimants wait ahead; a claim never jumps the queue.
	WaitQueue WaitReason = "queue"
	// WaitTenantLimit: the claimant's tenant holds its limit.
	WaitTenantLimit WaitReason = "tenant_limit"
	// WaitNoMatchingInstance: no ready instance that the claim selects has
	// a free seat, while other instances do.
	WaitNoMatchingInstance WaitReason = "no_matching_instance"
	// WaitInstancesFull: no ready instance has a free seat.
	WaitInstancesFull WaitReason = "instances_full"
	// WaitTenantDenied: the claimant's tenant has a limit of 0 in the pool
	// spec, so no claim of it can be granted until the spec changes. A
	// claim refused for it fails at once, waiting or not.
	WaitTenantDenied WaitReason = "tenant_denied"
)

// WaitReasons lists every WaitReason, in the order the planner checks them.
var WaitReasons = []WaitReason{WaitTenantDenied, WaitQueue, WaitPoolFull, WaitTenantLimit, WaitNoMatchingInstance, WaitInstancesFull}

// Text says the reason in a few words, for people: "pool full",
// "tenant at limit".
func (r WaitReason) Text() string {
	switch r {
	case WaitPoolFull:
		return "pool full"
	case WaitQueue:
		return "behind others in line"
	case WaitTenantLimit:
		return "tenant at limit"
	case WaitNoMatchingInstance:
		return "no ready instance matching"
	case WaitInstancesFull:
		return "every ready instance full"
	case WaitTenantDenied:
		return "tenant denied"
	}
	return string(r)
}

// NoSeatError is the error of a claim that found no seat it could take now.
// It matches ErrNoSeat with errors.Is; Reason says why.
type NoSeatError struct {
	Pool   string
	Reason WaitReason
	Detail string // for people, e.g. `tenant "acme" holds 1 of its limit 1`
}

func (e *NoSeatError) Error() string { return ErrNoSeat.Error() + ": " + e.Detail }

// Unwrap returns ErrNoSeat.
func (e *NoSeatError) Unwrap() error { return ErrNoSeat }

// Own reports whether the claimant's own constraints (its tenant's limit or
// its instance selector) bar it, while other claimants could be served.
func (e *NoSeatError) Own() bool {
	return e.Reason == WaitTenantLimit || e.Reason == WaitNoMatchingInstance || e.Reason == WaitTenantDenied
}

// Never reports whether no claim with the same options can be granted
// until the pool's spec changes (a tenant denied by a limit of 0), so
// waiting is pointless.
func (e *NoSeatError) Never() bool { return e.Reason == WaitTenantDenied }

// never reports whether err is a NoSeatError that waiting cannot resolve.
func never(err error) bool {
	var ns *NoSeatError
	return errors.As(err, &ns) && ns.Never()
}

// ownLimit reports whether err says the claimant's own constraints bar it:
// a NoSeatError that is Own, or a named instance that is not registered.
func ownLimit(err error) bool {
	var ns *NoSeatError
	return (errors.As(err, &ns) && ns.Own()) || errors.Is(err, ErrInstanceNotFound)
}

// InvalidError is an ErrInvalid or ErrBadSpec with its reason apart, for
// callers that show the reason next to what they name already (poolctl
// doctor prints the key in its own column): they read Reason instead of
// cutting the message. errors.Is matches Kind and Cause.
type InvalidError struct {
	Kind   error  // ErrInvalid or ErrBadSpec
	Key    string // the key concerned, or ""
	Reason string // why, without the key or Kind
	Cause  error  // a finer sentinel, or nil
}

func (e *InvalidError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("%v: key %q: %s", e.Kind, e.Key, e.Reason)
	}
	return fmt.Sprintf("%v: %s", e.Kind, e.Reason)
}

// Unwrap returns Kind and, if set, Cause.
func (e *InvalidError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}
