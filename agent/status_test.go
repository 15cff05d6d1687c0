package agent

import (
	"testing"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
)

// TestStatusNotRegisteredWhileInstanceMissing: once another agent's key
// of an instance is gone, the instance is missing until this agent has
// registered it again; /readyz (Status.Registered) must not say ready in
// between. Tested without etcd, on the ownership record alone.
func TestStatusNotRegisteredWhileInstanceMissing(t *testing.T) {
	a := New(nil, config.Agent{Name: "b"})
	a.registered = true // the session's registration pass is done
	r := ref{"p", "i1"}
	a.foreignOwner(r, &coordinator.InstanceOwnedError{Pool: "p", ID: "i1", Owner: 7, Agent: "a"})
	if a.Status().Registered {
		t.Fatal("Registered while another agent holds i1")
	}
	a.freed(r) // a's drain deleted its key
	if a.Status().Registered {
		t.Error("Registered after a's key went, before this agent registered i1")
	}
	a.owned(r)
	if !a.Status().Registered {
		t.Error("not Registered once this agent holds i1")
	}
}
