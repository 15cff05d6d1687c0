package coordinator

import (
	"fmt"
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestHeldBackAheadOrder: held-back waiters rejoin the line in the order
// they first waited, among those of the same constraints only. A record
// carries that revision once it is known ("arrival": a waiter that stepped
// out of line keeps the revision of its first queue key); the first record
// of a claim held back from the start does not, and its create revision
// stands for it. Tested without etcd, on a state of four records.
func TestHeldBackAheadOrder(t *testing.T) {
	k := keys{root: "/t"}
	rec := func(name string, tenant string, created, arrival int64) *mvccpb.KeyValue {
		v := fmt.Sprintf(`{"holder":%q,"tenant":%q,"since":"2026-12-03T00:00:00Z","reason":"tenant_limit"`, name, tenant)
		if arrival > 0 {
			v += fmt.Sprintf(`,"arrival":%d`, arrival)
		}
		return &mvccpb.KeyValue{Key: []byte(k.waitingKey("p", 1, uint64(created))), Value: []byte(v + "}"),
			CreateRevision: created, ModRevision: created, Version: 1, Lease: 1}
	}
	st := newPoolState(k, "p")
	recs := []*mvccpb.KeyValue{
		rec("a10", "a", 10, 0),
		rec("a20-stepped-out", "a", 20, 5), // queued at 5, stepped out at 20
		rec("b8", "b", 8, 0),
		rec("a30", "a", 30, 0),
	}
	st.load(40, recs)
	a := claimOptions{tenant: "a"}
	for _, tc := range []struct {
		own     *mvccpb.KeyValue
		arrival int64
		want    int
	}{
		{recs[0], 0, 1},  // rank 10 from its create revision: a20 (5) came first
		{recs[0], 10, 1}, // the same, known to its tracker
		{recs[1], 5, 0},  // first of tenant a
		{recs[3], 30, 2}, // a10 and a20 came first
		{nil, 0, 3},      // a newcomer not yet recorded: every waiter of tenant a came first
	} {
		own := k.waitingKey("p", 9, 9)
		if tc.own != nil {
			own = string(tc.own.Key)
		}
		if got := st.heldBackAhead(own, a, tc.arrival); got != tc.want {
			t.Errorf("heldBackAhead(%s, arrival %d) = %d; want %d", own, tc.arrival, got, tc.want)
		}
	}
	if got := st.heldBackAhead(string(recs[2].Key), claimOptions{tenant: "b"}, 0); got != 0 {
		t.Errorf("b8: %d ahead; want 0 (the others are of another tenant)", got)
	}
	var listed []string
	for _, w := range heldBackOf(st) {
		listed = append(listed, w.Holder)
	}
	if want := []string{"a20-stepped-out", "b8", "a10", "a30"}; !slices.Equal(listed, want) {
		t.Errorf("held-back waiters listed %v; want %v (by first revision)", listed, want)
	}
}
