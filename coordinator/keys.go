package coordinator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The key schema. This file is the only place that builds or parses keys.
//
//	<root>/pools/<pool>/spec                       pool spec (JSON), no lease
//	<root>/pools/<pool>/instances/<instance>       instance (JSON), agent's lease
//	<root>/pools/<pool>/seats/<seat>/<claim>              seat (JSON), holder's lease
//	<root>/pools/<pool>/binds/<instance>/<slot>/<claim>   instance slot, holder's lease
//	<root>/pools/<pool>/tenants/<tenant>/<slot>/<claim>   tenant slot, holder's lease
//	<root>/pools/<pool>/queue/<lease>-<nonce>      waiter (JSON), waiter's lease
//	<root>/pools/<pool>/fences/<lease>             claim fence, claimant's lease
//	<root>/pools/<pool>/released/<seat>            last release record (JSON)
//	<root>/pools/<pool>/waiting/<lease>-<nonce>    held-back waiter (JSON), its lease
//
// Seat and slot numbers are zero-padded to slotWidth digits so that lexical
// order is numeric order and "seats/1" is never a prefix of "seats/10".
// Leases and nonces are 16 hex digits. Names never contain '/'.
//
// <claim> is the claimant's <lease>-<nonce>, the name of its queue key too,
// which is how a waiter finds the seat granted to it (grant.go); a session
// reuses the nonce of a claim that ended cleanly
// (names.go). A slot is held while a key exists under its prefix (slotPrefix),
// and every claim keeps at most one there. Naming the key after the claim
// lets one transaction delete a holder's slot keys and create the next
// holder's in the same slots (a hand-off, see handoff.go): etcd refuses a
// txn that deletes and puts the same key, and a re-created key would keep
// neither its create revision (the token) nor the rule that it only grows.

const (
	slotWidth = 7 // holds 0..9,999,999; MaxCapacity is 1,000,000
	maxSlot   = 10_000_000
	hexWidth  = 16
)

// Key kinds, by the segment that follows the pool name.
const (
	segSpec      = "spec"
	segInstances = "instances"
	segSeats     = "seats"
	segBinds     = "binds"
	segTenants   = "tenants"
	segQueue     = "queue"
	segGrants    = "grants" // before v0.4 only; see errOldSchema
	segFences    = "fences"
	segReleased  = "released"
	segWaiting   = "waiting" // see waiting.go; outside queue/, so no claim compares it
)

// keys builds keys under one root prefix.
type keys struct{ root string }

func (k keys) pools() string             { return k.root + "/pools/" }
func (k keys) pool(p string) string      { return k.pools() + p + "/" }
func (k keys) spec(p string) string      { return k.pool(p) + segSpec }
func (k keys) instances(p string) string { return k.pool(p) + segInstances + "/" }
func (k keys) instance(p, id string) string {
	return k.instances(p) + id
}
func (k keys) seats(p string) string { return k.pool(p) + segSeats + "/" }
func (k keys) seat(p string, n int, claim string) string {
	return slotPrefix(k.seats(p), n) + claim
}
func (k keys) binds(p, id string) string { return k.pool(p) + segBinds + "/" + id + "/" }
func (k keys) bind(p, id string, n int, claim string) string {
	return slotPrefix(k.binds(p, id), n) + claim
}
func (k keys) tenants(p, t string) string { return k.pool(p) + segTenants + "/" + t + "/" }
func (k keys) tenant(p, t string, n int, claim string) string {
	return slotPrefix(k.tenants(p, t), n) + claim
}

// slotPrefix is the prefix of slot n of a set: the slot is held while a key
// exists under it.
func slotPrefix(set string, n int) string { return set + slot(n) + "/" }
func (k keys) queue(p string) string      { return k.pool(p) + segQueue + "/" }
func (k keys) queueKey(p string, lease clientv3.LeaseID, nonce uint64) string {
	return k.queue(p) + queueName(lease, nonce)
}
func queueName(lease clientv3.LeaseID, nonce uint64) string {
	var b [2*hexWidth + 1]byte
	putHex(b[:hexWidth], uint64(lease))
	b[hexWidth] = '-'
	putHex(b[hexWidth+1:], nonce)
	return string(b[:])
}
func (k keys) fence(p string, lease clientv3.LeaseID) string {
	var b [hexWidth]byte
	putHex(b[:], uint64(lease))
	return k.pool(p) + segFences + "/" + string(b[:])
}
func (k keys) waitingKey(p string, lease clientv3.LeaseID, nonce uint64) string {
	return k.pool(p) + segWaiting + "/" + queueName(lease, nonce)
}
func (k keys) released(p string, n int) string {
	return k.pool(p) + segReleased + "/" + slot(n)
}

// slot formats n zero-padded to slotWidth digits. (These formatters run on
// the release path, before its txn is sent: they avoid fmt, whose cost
// there shows in BenchmarkReleaseToGrant.)
func slot(n int) string {
	if n < 0 || n >= maxSlot {
		return fmt.Sprintf("%0*d", slotWidth, n) // never a slot in use: MaxCapacity < maxSlot
	}
	var b [slotWidth]byte
	for i := slotWidth - 1; i >= 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[:])
}

// putHex writes v into dst as lower-case hex, zero-padded to len(dst).
func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = "0123456789abcdef"[v&15]
		v >>= 4
	}
}

// parsedKey is a key under <root>/pools/ split into its parts.
type parsedKey struct {
	Pool  string
	Seg   string // one of the seg* constants
	Name  string // instance, tenant or queue entry name; empty otherwise
	Slot  int    // seat or slot number; -1 where the kind has none
	Claim string // the holding claim's <lease>-<nonce>, for seat and slot keys
}

// errOldSchema marks a key that an older etcdpool wrote and this one does
// not: a seat or slot key without its claim segment (seats/<seat>, before
// v0.3), or a grant key (grants/<lease>-<nonce>, before v0.4, when a waiter
// learnt of its grant from a key of its own rather than from its seat).
// Claims refuse to run beside one: an older etcdpool on the same pool
// would wait for grants that this one does not write.
var errOldSchema = errors.New("key of an older etcdpool's schema")

// oldSchema returns the parse error of a key of an older schema.
func oldSchema(key, what string) (parsedKey, error) {
	return parsedKey{}, &InvalidError{Kind: ErrInvalid, Key: key, Reason: what, Cause: errOldSchema}
}

// parse splits a key built by keys. It rejects anything else, so that a
// stray key written by hand is ignored rather than misread.
func (k keys) parse(key string) (parsedKey, error) {
	bad := func(why string) (parsedKey, error) {
		return parsedKey{}, &InvalidError{Kind: ErrInvalid, Key: key, Reason: why}
	}
	rest, ok := strings.CutPrefix(key, k.pools())
	if !ok {
		return bad("outside the pools prefix")
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || ValidateName(parts[0]) != nil {
		return bad("bad pool segment")
	}
	pk := parsedKey{Pool: parts[0], Seg: parts[1], Slot: -1}
	args := parts[2:]
	var err error
	switch pk.Seg {
	case segSpec:
		if len(args) != 0 {
			return bad("spec has no children")
		}
	case segInstances:
		if len(args) != 1 || ValidateName(args[0]) != nil {
			return bad("bad instance id")
		}
		pk.Name = args[0]
	case segReleased:
		if len(args) != 1 {
			return bad("bad seat")
		}
		pk.Slot, err = parseSlot(args[0])
	case segSeats:
		if len(args) == 1 && parseOK(args[0]) {
			return oldSchema(key, "seat key of the schema before v0.3")
		}
		if len(args) != 2 || !validHexName(args[1], true) {
			return bad("bad seat")
		}
		pk.Claim = args[1]
		pk.Slot, err = parseSlot(args[0])
	case segBinds, segTenants:
		if len(args) == 2 && ValidateName(args[0]) == nil && parseOK(args[1]) {
			return oldSchema(key, "slot key of the schema before v0.3")
		}
		if len(args) != 3 || ValidateName(args[0]) != nil || !validHexName(args[2], true) {
			return bad("bad slot key")
		}
		pk.Name, pk.Claim = args[0], args[2]
		pk.Slot, err = parseSlot(args[1])
	case segGrants:
		if len(args) == 1 && validHexName(args[0], true) {
			return oldSchema(key, "grant key of the schema before v0.4")
		}
		return bad("bad lease segment")
	case segQueue, segFences, segWaiting:
		if len(args) != 1 || !validHexName(args[0], pk.Seg != segFences) {
			return bad("bad lease segment")
		}
		pk.Name = args[0]
	default:
		return bad("unknown segment")
	}
	if err != nil {
		return bad(err.Error())
	}
	return pk, nil
}

func parseOK(s string) bool { _, err := parseSlot(s); return err == nil }

func parseSlot(s string) (int, error) {
	if len(s) != slotWidth {
		return 0, fmt.Errorf("slot %q is not %d digits", s, slotWidth)
	}
	// Digits only: strconv.Atoi also takes a sign, and "+000001" or
	// "-000000" sort below every slot a claim writes, so no claim's range
	// compare would see such a key, while the planner counted it held.
	n := 0
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("slot %q is not a number", s)
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, nil
}

// validHexName accepts <16 hex> or, for queue entries, <16 hex>-<16 hex>.
func validHexName(s string, pair bool) bool {
	want := hexWidth
	if pair {
		want = 2*hexWidth + 1
	}
	if len(s) != want {
		return false
	}
	for i, r := range s {
		if pair && i == hexWidth {
			if r != '-' {
				return false
			}
			continue
		}
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// leaseOfHex reads the lease from a queue, grant or fence name.
func leaseOfHex(name string) clientv3.LeaseID {
	v, _ := strconv.ParseUint(name[:hexWidth], 16, 64)
	return clientv3.LeaseID(v)
}

// nonceOfHex reads the nonce from a claim name.
func nonceOfHex(name string) uint64 {
	v, _ := strconv.ParseUint(name[hexWidth+1:], 16, 64)
	return v
}
