// Package agent is the logic behind poolagent: the agent that registers a
// host's instances under one lease and drains them on shutdown (Agent), the
// claimant that holds one seat for a Kubernetes pod (Sidecar), their health
// endpoints, and the seat file the sidecar shares with the application.
//
// What it does not guarantee: a seat file that says "held" is advice, as is
// a passing probe. Between a loss and the file being rewritten the
// application may act on a seat it no longer holds; writes that must not
// happen then should be fenced with the token (see coordinator.Claim.IsOwner).
// An agent whose lease expires (an etcd outage longer than its TTL) loses
// its instances, and with them every claim bound to them, before it can
// register again; re-registration restores the instances, not the claims.
// The same holds for an instance deleted by hand while the agent's lease
// lives: the agent registers it again (within a few hundred milliseconds,
// backing off up to 5s while deletions repeat), but the claims bound to it
// are gone. A sidecar whose session is lost while it waits queues again at
// the back of the line.
package agent
