package coordinator

import "errors"

// Exported views of the key schema in keys.go, for tools outside the
// library that must name keys: poolctl's roles (which prefixes each actor
// needs) and doctor (which keys are foreign or damaged), and poolagent's
// permission check at start. keys.go stays the only place that builds or
// parses keys.

// Key segments that follow <root>/pools/<pool>/.
const (
	// SegSpec is the pool spec key.
	SegSpec = segSpec
	// SegInstances holds instance keys.
	SegInstances = segInstances
	// SegSeats holds seat keys.
	SegSeats = segSeats
	// SegBinds holds instance slot keys.
	SegBinds = segBinds
	// SegTenants holds tenant slot keys.
	SegTenants = segTenants
	// SegQueue holds waiter keys.
	SegQueue = segQueue
	// SegFences holds claim fences.
	SegFences = segFences
	// SegReleased holds release records.
	SegReleased = segReleased
	// SegWaiting holds the records of waiters held back off the queue.
	SegWaiting = segWaiting
)

// ClaimantSegments are the segments under a pool that a claimant writes.
var ClaimantSegments = []string{segSeats, segBinds, segTenants, segQueue, segFences, segReleased, segWaiting}

// SlotWidth is the number of digits of a seat or slot number in a key.
const SlotWidth = slotWidth

// PoolsPrefix returns <root>/pools/.
func PoolsPrefix(root string) string { return keys{root: root}.pools() }

// PoolPrefix returns <root>/pools/<pool>/.
func PoolPrefix(root, pool string) string { return keys{root: root}.pool(pool) }

// SegPrefix returns <root>/pools/<pool>/<seg>/ (for SegSpec, the spec
// key itself).
func SegPrefix(root, pool, seg string) string {
	if seg == segSpec {
		return keys{root: root}.spec(pool)
	}
	return keys{root: root}.pool(pool) + seg + "/"
}

// SeatPrefix returns the prefix of seat n of pool: the seat is held while a
// key exists under it, <prefix><lease>-<nonce> of the holding claim.
func SeatPrefix(root, pool string, n int) string { return slotPrefix(keys{root: root}.seats(pool), n) }

// IsOldSchema reports whether err, from ParseKey, says the key is one that
// only an older etcdpool writes: a seat or slot key of the schema before
// v0.3 (no claim segment), or a grant key (before v0.4).
func IsOldSchema(err error) bool { return errors.Is(err, errOldSchema) }

// HealthzKey returns the key poolagent reads in its /healthz probe.
func HealthzKey(root string) string { return root + "/healthz" }

// ParsedKey is a key under <root>/pools/ split into its parts.
type ParsedKey struct {
	// Pool is the pool name.
	Pool string
	// Seg is one of the Seg* constants.
	Seg string
	// Name is the instance, tenant or lease segment; empty otherwise.
	Name string
	// Slot is the seat or slot number; -1 where the kind has none.
	Slot int
	// Claim is the holding claim's <lease>-<nonce>, for seat and slot keys.
	Claim string
}

// ParseKey splits a key built by the library under root. Any other key
// under <root>/pools/ is an error wrapping ErrInvalid that says why.
func ParseKey(root, key string) (ParsedKey, error) {
	pk, err := keys{root: root}.parse(key)
	return ParsedKey(pk), err
}
