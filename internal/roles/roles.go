// Package roles says what each etcdpool actor needs from etcd's RBAC, in
// one place: `poolctl roles` prints or applies it, and poolagent checks it
// at start. Keys come from coordinator's schema.
//
// What etcd RBAC cannot prevent: permissions are per key prefix, not per
// holder. A claimant with readwrite on a pool's seats/ can delete or
// overwrite any seat there (force-release others), plant keys, or hold a
// seat with a key that has no lease; the release record's "by" field is
// whatever the client writes. RBAC bounds which pool an actor can touch,
// not how it behaves inside it. A service in front of etcd (the planned
// HTTP API) is the boundary that closes this.
package roles

import (
	"fmt"
	"strings"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Actor is a kind of etcdpool client.
type Actor string

// Actors.
const (
	// Claimant claims seats of one pool (poolctl run, the sidecar, a Go
	// service using the coordinator).
	Claimant Actor = "claimant"
	// Agent registers the instances of one pool (poolagent serve).
	Agent Actor = "agent"
	// Operator manages every pool under the prefix (poolctl).
	Operator Actor = "operator"
	// Viewer reads every pool under the prefix (poolctl status, seats,
	// watch).
	Viewer Actor = "viewer"
)

// Actors lists every actor, in the order the README documents them.
var Actors = []Actor{Claimant, Agent, Operator, Viewer}

// PoolScoped reports whether the actor's role is for one pool.
func (a Actor) PoolScoped() bool { return a == Claimant || a == Agent }

// Parse returns the actor named s.
func Parse(s string) (Actor, error) {
	for _, a := range Actors {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("actor %s: want one of %s", etcdclient.Truncate(s), strings.Join(names(), ", "))
}

func names() []string {
	out := make([]string, len(Actors))
	for i, a := range Actors {
		out[i] = string(a)
	}
	return out
}

// Permissions lists what actor needs under root for pool (pool is
// ignored for operator and viewer, whose roles cover root).
func Permissions(root, pool string, actor Actor) []etcdclient.Access {
	switch actor {
	case Claimant:
		out := []etcdclient.Access{{Key: coordinator.PoolPrefix(root, pool), Prefix: true}}
		for _, seg := range coordinator.ClaimantSegments {
			out = append(out, etcdclient.Access{Write: true, Key: coordinator.SegPrefix(root, pool, seg), Prefix: true})
		}
		return out
	case Agent:
		return []etcdclient.Access{
			{Key: coordinator.PoolsPrefix(root), Prefix: true},
			{Key: coordinator.HealthzKey(root)},
			{Write: true, Key: coordinator.SegPrefix(root, pool, coordinator.SegInstances), Prefix: true},
		}
	case Operator:
		return []etcdclient.Access{{Write: true, Key: root + "/", Prefix: true}}
	case Viewer:
		return []etcdclient.Access{{Key: root + "/", Prefix: true}}
	}
	return nil
}

// Name is the role name for actor on pool: etcdpool-<pool>-<actor>, or
// etcdpool-<actor> for the actors that cover the whole prefix. A root
// other than the default adds its path: etcdpool-team-a-gpu-claimant.
func Name(root, pool string, actor Actor) string {
	parts := []string{"etcdpool"}
	if r := strings.Trim(root, "/"); r != strings.Trim(coordinator.DefaultPrefix, "/") {
		parts = append(parts, strings.ReplaceAll(r, "/", "-"))
	}
	if actor.PoolScoped() {
		parts = append(parts, pool)
	}
	return strings.Join(append(parts, string(actor)), "-")
}

// Etcdctl returns the etcdctl commands that create role name with perms.
func Etcdctl(name string, perms []etcdclient.Access) []string {
	out := []string{"etcdctl role add " + shellQuote(name)}
	for _, p := range perms {
		kind := "read"
		if p.Write {
			kind = "readwrite"
		}
		prefix := ""
		if p.Prefix {
			prefix = " --prefix=true"
		}
		out = append(out, fmt.Sprintf("etcdctl role grant-permission %s %s %s%s", shellQuote(name), kind, shellQuote(p.Key), prefix))
	}
	return out
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
