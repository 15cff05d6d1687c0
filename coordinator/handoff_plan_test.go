package coordinator

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestHandoffLeavesFreeSeatToHead: a release plans no hand-off when the
// first waiter may take a seat that is free already, since the head's own
// claim of that seat would race the hand-off; it plans one when the seat
// it frees is the only one. Tested without etcd, on a state of one held
// seat and one waiter.
func TestHandoffLeavesFreeSeatToHead(t *testing.T) {
	k := keys{root: "/t"}
	holder := queueName(1, 5)
	state := func(capacity int) *poolState {
		st := newPoolState(k, "p")
		st.load(3, []*mvccpb.KeyValue{
			{Key: []byte(k.spec("p")), Value: []byte(fmt.Sprintf(`{"capacity":%d}`, capacity)), CreateRevision: 1, ModRevision: 1, Version: 1},
			{Key: []byte(k.seat("p", 0, holder)), Value: []byte(`{"tenantSlot":-1,"bindSlot":-1}`), CreateRevision: 2, ModRevision: 2, Version: 1, Lease: 1},
			{Key: []byte(k.queueKey("p", 2, 7)), Value: []byte(`{"holder":"w","since":"2026-12-01T00:00:00Z"}`), CreateRevision: 3, ModRevision: 3, Version: 1, Lease: 2},
		})
		return st
	}
	h := heldSeat{pool: "p", seat: 0, token: 2, lease: 1, claim: holder, rec: seatRecord{TenantSlot: -1, BindSlot: -1, Nonce: 5}}
	if p := state(1).planHandoff(h); p == nil || p.seat != 0 {
		t.Errorf("full pool of 1 seat: hand-off %+v; want the freed seat 0 granted to the waiter", p)
	}
	if p := state(2).planHandoff(h); p != nil {
		t.Errorf("pool of 2 seats with seat 1 free: hand-off of seat %d planned; want none (the head claims the free seat)", p.seat)
	}
}

// TestHandoffProvesPassedOverTenant: a hand-off that passes over a waiter
// at its tenant's limit carries, among its compares, that the tenant's
// held slot is still held by the same key, so that the release fails as a
// whole, rather than overtake that waiter, if the slot freed meanwhile
// (passover.go). Tested without etcd; TestPassedOverWaiterNotOvertaken
// shows the same rule on etcd for a head's grants.
func TestHandoffProvesPassedOverTenant(t *testing.T) {
	k := keys{root: "/t"}
	releaser, tenantHolder := queueName(1, 5), queueName(3, 6)
	st := newPoolState(k, "p")
	st.load(6, []*mvccpb.KeyValue{
		{Key: []byte(k.spec("p")), Value: []byte(`{"capacity":2,"tenantLimits":{"a":1}}`), CreateRevision: 1, ModRevision: 1, Version: 1},
		{Key: []byte(k.seat("p", 0, releaser)), Value: []byte(`{"tenantSlot":-1,"bindSlot":-1}`), CreateRevision: 2, ModRevision: 2, Version: 1, Lease: 1},
		{Key: []byte(k.seat("p", 1, tenantHolder)), Value: []byte(`{"tenant":"a","tenantSlot":0,"bindSlot":-1}`), CreateRevision: 3, ModRevision: 3, Version: 1, Lease: 3},
		{Key: []byte(k.tenant("p", "a", 0, tenantHolder)), Value: []byte(slot(1)), CreateRevision: 3, ModRevision: 3, Version: 1, Lease: 3},
		{Key: []byte(k.queueKey("p", 4, 7)), Value: []byte(`{"holder":"a1","tenant":"a","since":"2026-12-01T00:00:00Z"}`), CreateRevision: 5, ModRevision: 5, Version: 1, Lease: 4},
		{Key: []byte(k.queueKey("p", 2, 8)), Value: []byte(`{"holder":"g","since":"2026-12-01T00:00:00Z"}`), CreateRevision: 6, ModRevision: 6, Version: 1, Lease: 2},
	})
	h := heldSeat{pool: "p", seat: 0, token: 2, lease: 1, claim: releaser, rec: seatRecord{TenantSlot: -1, BindSlot: -1, Nonce: 5}}
	p := st.planHandoff(h)
	if p == nil || p.lease != 2 {
		t.Fatalf("hand-off %+v; want the seat handed to g, past a1 at tenant a's limit", p)
	}
	prefix := slotPrefix(k.tenants("p", "a"), 0)
	var got []string
	for _, c := range p.cmps {
		pc := c.GetCompare()
		if string(pc.Key) == prefix && pc.GetCreateRevision() == 3 && pc.Result == pb.Compare_EQUAL {
			return
		}
		got = append(got, fmt.Sprintf("%s %v %v", pc.Key, pc.Target, pc.TargetUnion))
	}
	t.Fatalf("hand-off compares %q: none proves tenant a's slot %s still held under create revision 3", got, prefix)
}
