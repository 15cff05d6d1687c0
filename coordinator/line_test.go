package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLineFollowsQueue: whatever puts and deletes a state's queue keys
// see (new keys, rewrites, a key put again at a new create revision, keys
// that lose their lease, deletes of keys never seen), its line holds
// exactly the queue, in arrival order, and ahead and countAhead agree with
// a scan of the queue. A clone's line is its own.
func TestLineFollowsQueue(t *testing.T) {
	k := keys{root: "/t"}
	r := rand.New(rand.NewPCG(1, 2))
	st := newPoolState(k, "p")
	key := func(n int) string { return k.queueKey("p", clientv3.LeaseID(n+1), 7) }
	rev := int64(1)
	for step := range 5000 {
		n := r.IntN(40)
		switch op := r.IntN(10); {
		case op < 5: // put, new or again
			rev++
			create := rev
			if old := st.queue[key(n)]; old != nil && r.IntN(2) == 0 {
				create = old.CreateRevision // a rewrite keeps its create revision
			} else if r.IntN(8) == 0 {
				create = rev - int64(r.IntN(3)) // same revision as another key
			}
			lease := int64(n + 1)
			if r.IntN(10) == 0 {
				lease = 0 // not a waiter of ours
			}
			st.put(&mvccpb.KeyValue{Key: []byte(key(n)), CreateRevision: create, ModRevision: rev, Version: 1, Lease: lease})
		case op < 9:
			st.del(key(n))
		default: // a clone changes apart from its original (checked below)
			c := st.clone()
			c.del(key(n))
			checkLine(t, step, c)
		}
		checkLine(t, step, st)
	}
}

func checkLine(t *testing.T, step int, st *poolState) {
	t.Helper()
	want := make([]*mvccpb.KeyValue, 0, len(st.queue))
	for _, kv := range st.queue {
		want = append(want, kv)
	}
	slices.SortFunc(want, arrival)
	if !slices.Equal(st.line, want) {
		t.Fatalf("step %d: line %v; want the queue in arrival order %v", step, lineKeys(st.line), lineKeys(want))
	}
	// The answers change only at a queued key's create revision and the
	// one after it.
	revs := []int64{0}
	for _, kv := range want {
		revs = append(revs, kv.CreateRevision, kv.CreateRevision+1)
	}
	for _, rev := range revs {
		var ahead *mvccpb.KeyValue
		n := 0
		for _, kv := range want {
			if kv.CreateRevision < rev {
				ahead, n = kv, n+1
			}
		}
		if got := st.ahead(rev); got != ahead {
			t.Fatalf("step %d: ahead(%d) = %v; want %v", step, rev, got, ahead)
		}
		if got := st.countAhead(rev); got != n {
			t.Fatalf("step %d: countAhead(%d) = %d; want %d", step, rev, got, n)
		}
	}
}

func lineKeys(kvs []*mvccpb.KeyValue) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = fmt.Sprintf("%s@%d", kv.Key[len(kv.Key)-20:], kv.CreateRevision)
	}
	return out
}

// BenchmarkPlanHandoff plans a release's hand-off in a full pool of one
// seat, with 1 and with 500 waiters: the cost must not grow with the
// queue (it was 8 and 60 µs when the plan sorted the queue).
//
//	go test -run XXX -bench PlanHandoff -benchmem ./coordinator/
func BenchmarkPlanHandoff(b *testing.B) {
	for _, n := range []int{1, 500} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			k := keys{root: "/t"}
			holder := queueName(1, 5)
			st := newPoolState(k, "p")
			kvs := []*mvccpb.KeyValue{
				{Key: []byte(k.spec("p")), Value: []byte(`{"capacity":1}`), CreateRevision: 1, ModRevision: 1, Version: 1},
				{Key: []byte(k.seat("p", 0, holder)), Value: []byte(`{"tenantSlot":-1,"bindSlot":-1}`), CreateRevision: 2, ModRevision: 2, Version: 1, Lease: 1},
			}
			for i := range n {
				kvs = append(kvs, &mvccpb.KeyValue{Key: []byte(k.queueKey("p", clientv3.LeaseID(2+i), 7)),
					Value:          []byte(`{"holder":"w","since":"2026-12-01T00:00:00Z"}`),
					CreateRevision: int64(3 + i), ModRevision: int64(3 + i), Version: 1, Lease: int64(2 + i)})
			}
			st.load(int64(3+n), kvs)
			h := heldSeat{pool: "p", seat: 0, token: 2, lease: 1, claim: holder, rec: seatRecord{TenantSlot: -1, BindSlot: -1, Nonce: 5}}
			for b.Loop() {
				if st.planHandoff(h) == nil {
					b.Fatal("no hand-off planned")
				}
			}
		})
	}
}
