// Package coordinator hands out the seats of worker pools safely under
// concurrency, on etcd.
//
// A pool has a capacity, optional per-tenant limits and, optionally,
// registered instances (workers hosted by agents). A claimant holding a
// Session takes a seat with Claim and gives it back with Release. Every key a
// claim writes is bound to the claimant's session lease, so a claimant that
// dies frees its seat when the lease expires: there is no counter to leak and
// no janitor.
//
// # Key schema
//
// All keys live under a root prefix (DefaultPrefix, "/etcdpool"):
//
//	<root>/pools/<pool>/spec                      PoolSpec JSON; no lease
//	<root>/pools/<pool>/instances/<id>            Instance JSON; agent's lease
//	<root>/pools/<pool>/seats/<seat>/<claim>             seat record JSON; holder's lease
//	<root>/pools/<pool>/binds/<id>/<slot>/<claim>        instance slot; holder's lease
//	<root>/pools/<pool>/tenants/<tenant>/<slot>/<claim>  tenant slot; holder's lease
//	<root>/pools/<pool>/queue/<lease>-<nonce>     waiter JSON; waiter's lease
//	<root>/pools/<pool>/fences/<lease>            claim fence; claimant's lease
//	<root>/pools/<pool>/released/<seat>           last release record; its holder's lease
//	<root>/pools/<pool>/waiting/<lease>-<nonce>   held-back waiter JSON; its lease (waiting.go)
//
// Seats and slots are 7-digit zero-padded numbers, so lexical order is
// numeric order; names never contain '/'. <claim> is the holding claim's
// <lease>-<nonce>; a slot is held while a key exists under <slot>/, and
// holds at most one (every claim compares that range). Keys of an older
// schema (before v0.3, seat and slot keys without the <claim> segment;
// before v0.4, grant keys, grants/<lease>-<nonce>) make claims fail with
// ErrForeignKey naming them. A claim takes a seat number below
// the number held plus 16, so the seat numbers in use stay within the peak
// held plus 16. A release record is keyed by seat number and bound to the
// lease of the holder it describes, so records go with their sessions: a
// pool's keys stay bounded by its held seats, its waiters, its live
// sessions and a constant, however long its history. (Before this schema,
// records had no lease and claims chose any seat number, so a pool kept one
// record per seat number ever released; such records are harmless and
// `poolctl doctor` will list them.)
//
// # Invariants
//
// Each claim is one transaction that takes a free seat slot below capacity,
// a free tenant slot below the tenant's limit and a free slot of a ready
// instance below its seat count, all or nothing. Its compares check, on the
// server: the spec's mod revision (so a capacity or limit change aborts it);
// that each chosen slot has CreateRevision 0; that no slot at or above each
// limit is held (or, after a limit shrank, that no slot was created since the
// revision the claimant counted at); the instance key's mod revision (so it
// is registered and was ready); the queue (empty for a fresh claim, nobody
// ahead and its own key present for a waiter); and the claimant's fence key.
// From these, at every revision of etcd's history:
//
//   - a seat is granted only while fewer than capacity seats are held;
//     after a shrink, holders above the new capacity keep their seats and
//     nothing is granted until fewer than the new capacity are held;
//   - no instance serves more claims than its seats (one, if exclusive);
//   - no tenant holds more seats than its limit had when the seat was granted;
//   - a waiter whose queue key is gone (its session died) is never granted.
//
// An uncontended claim with a warm cache is one round trip. A first claim,
// and a failed claim's Else branch, read a probe of the pool (probe.go): what
// that claim plans from, tens of keys, not every seat. Claimants of one
// process choose different free seats: a seat that a claim txn of the
// process in flight chose is picked only when every free seat is, and a
// claimant that may wait queues then instead (plan.go, cache.go). Waiters
// queue in arrival order. While a process has waiters on a pool, or holds
// a seat of a pool of at most 64 seats, one pool feed keeps its view exact
// (feed.go), and a new waiter queues on that view
// without reading the pool first; each waiter sleeps until the key of the
// waiter ahead or its own queue key changes, so a release wakes one waiter. The
// head grants free seats to itself and, in the same txn, to the waiters
// behind it in order, each grant a nested txn that re-checks that waiter's
// queue key, fence and slots, and writes its seat under its name, which is
// how the waiter finds it (grant.go). A release made while others wait,
// when the releasing process's view shows them, hands the seat to the
// first of them in the release txn itself, by the same compares and writes
// added to the release's own (handoff.go). A waiter barred by its own
// tenant limit or instance selector steps out of line instead of blocking
// the others (see queue.go). Held-back waiters of one tenant and selector
// rejoin in arrival order within a process (heldback.go), and across
// processes for a short grace, by their waiting records
// (heldback_peers.go): an order hint, not a guarantee.
//
// # Liveness and loss
//
// Session.Done closes at the local deadline, from a timer, whatever etcd
// does; Claim.Done closes with it. Every RPC of a claimant is bound to its
// session, and Claim never returns a seat whose session is past its
// deadline.
//
// # Fencing
//
// A claim's token is the create revision of its seat key. It grows each time
// the seat changes hands. Release and ForceRelease delete only if the token
// still matches, so a stale or repeated release never frees a newer claim.
// Claim.IsOwner returns the compare to put in your own transactions.
//
// Fencing does NOT cover:
//
//   - side effects outside etcd. A holder that pauses (GC, SIGSTOP, a
//     partition) past its lease can wake up and act after its seat was
//     granted to someone else; etcd cannot stop it. Pass Token to the
//     downstream service and have it reject tokens older than the newest it
//     has seen for that seat, or guard the writes with IsOwner.
//   - the holder's process. ForceRelease frees the seat in etcd; the holder
//     learns it through Done and must stop itself.
//   - wall-clock skew. Session.Done closes at the local deadline (last
//     keepalive sent + TTL - margin), which is before the server can expire
//     the lease as long as the local clock does not run slow by more than the
//     margin over one TTL.
//
// # Liveness
//
// A dead holder's seat frees when its lease expires: within TTL plus the
// server's expiry scan (about 0.5 s), longer across a leader election, which
// refreshes every lease (etcd#9888). The head waiter's watch then sees the
// delete and claims at once.
//
// # History
//
// The range compares of every claim walk the keys etcd has deleted but not
// yet compacted. Keys are named after their claim, and a session reuses
// the names of its claims that ended cleanly (names.go), so those deleted
// keys stay bounded by the sessions that used a range; names left in doubt
// (an ambiguous txn not settled, a failed cleanup) are not reused and add
// up until etcd compacts. Run etcd with auto-compaction all the same
// (README, Known limits).
//
// # Errors
//
// All sentinel errors are in errors.go and match with errors.Is. A claim txn
// that fails ambiguously (timeout, lost connection) may have committed; the
// claimant bumps its fence key so the lost attempt can no longer commit, then
// re-reads and adopts the seat if it did. If etcd stays unreachable past the
// caller's ctx, the same cleanup continues in the background until it
// succeeds, the session ends or the Coordinator is closed; close such a
// session after closing the Coordinator to be sure nothing of it survives.
package coordinator
