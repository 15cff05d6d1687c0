// Package httpapi serves etcdpool over HTTP/JSON, so that programs in any
// language can hold seats, and draws the authorization boundary that etcd
// RBAC cannot: claimants hold no etcd credentials, only a bearer token or
// a client certificate, and each principal may use only its pools, its
// tenants, its operations and its own sessions.
//
// # Endpoints
//
//	POST   /v1/sessions                                {ttl}        open a session (claim)
//	POST   /v1/sessions/{session}/keepalive                         renew it (claim)
//	DELETE /v1/sessions/{session}                                   revoke it, freeing its seats (claim)
//	POST   /v1/pools/{pool}/claims                     {session, tenant, instance, labels, holder, wait}
//	DELETE /v1/pools/{pool}/seats/{seat}?token=T&session=S          release (claim)
//	GET    /v1/pools/{pool}/seats/{seat}/events?token=T&session=S   loss stream (claim)
//	GET    /v1/pools, /v1/pools/{pool}[/seats|/queue|/instances]    (read)
//	GET    /v1/pools/{pool}/events                                  event stream (read)
//	POST   /v1/pools/{pool}/seats/{seat}/force-release {token, reason} (force-release)
//	POST   /v1/pools/{pool}/instances/{instance}/drain              (drain)
//	PUT    /v1/pools/{pool}                            PoolSpec     create or update (admin)
//	GET    /v1/openapi.json                                         this API, OpenAPI 3 (no auth)
//
// openapi.json, embedded, is the full reference; a test checks that it
// lists exactly the routes the server serves. Errors are JSON bodies
// (ErrorBody) with a code per outcome and distinct statuses: 400
// invalid_input, 401 unauthenticated, 403 forbidden, 404 not_found or
// not_held, 408 wait_timeout, 409 no_seat (with the reason) or conflict,
// 410 session_gone, 412 stale_token, 503 unavailable, and 500 internal,
// whose message is only a ref to the server's log. A message names only
// what the request sent, never another holder's token or lease.
//
// # Sessions are leases
//
// A session is an etcd lease granted for the client. Its handle is the
// lease ID and a random secret, "<16 hex>.<32 hex>"; the record
// <root>/api/sessions/<lease>, bound to the lease, holds the principal and
// the secret's SHA-256. Every replica checks a handle against the record
// (and caches it: a lease's record never changes), so a client may send
// each request to any replica, and a replica that dies loses nothing. The
// client keeps its session alive with keepalive requests, at least every
// TTL/3; no replica ever keeps a client's lease alive by itself. When the
// client stops, its seats free after the TTL, exactly as with the library.
//
// To claim, a replica borrows the client's lease (coordinator.BorrowSession):
// it follows the lease's time left without renewing it, and calls
// Coordinator.Claim with it. The seat is bound to the client's lease. The
// replica stops watching the claim (Claim.Detach) but remembers it with
// the session, so that a release on the same replica is one txn fenced by
// the token; a release on another replica, or a loss stream, finds it with
// Coordinator.Adopt, which checks on the server that the seat is bound to
// the session's lease under that token.
//
// # Authorization
//
// A principal (Principal) is identified by the SHA-256 of its bearer
// token, or by its verified client certificate's subject CN or DNS SAN. It
// may use the pools its globs match, claim for its tenants (a list, "self"
// or "*"), and perform its operations: claim, read, force-release, drain,
// admin (all of them, and pool creation). A principal can keep alive,
// claim on, release through or delete only sessions it opened; a release
// record's "by" names the authenticated principal, never a string the
// client sent. Anonymous access (WithAnonymous) is for plain HTTP on
// loopback only: poolagent refuses at startup to serve plain HTTP on any
// other address.
//
// # What it does not guarantee
//
//   - The loss stream is advice, as Claim.Done is: a client cut off from
//     every replica learns nothing, and must keep its own deadline (the
//     last keepalive it SENT plus the TTL) and fence its writes with the
//     token.
//   - A loss stream ends with a "closed" event when its replica shuts down
//     (server_closed) or lost track of the lease: its copy of the session
//     passed its local deadline and etcd, asked then, did not say the lease
//     is gone (server_cut_off). The seat may still be held, the lease kept
//     alive through another replica: reconnect to another replica.
//   - A handle is a bearer secret within its principal: anyone holding it
//     and the principal's credentials can act on the session.
package httpapi
