package coordinator

import (
	"fmt"
	"testing"

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
