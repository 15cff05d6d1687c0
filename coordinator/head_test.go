package coordinator

import (
	"fmt"
	"runtime"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestHeadLookIsO1InFullPool: the head waiter looks at the pool after
// every change. In a full pool it must not copy the pool each time (that
// is O(held) per change, for as long as it waits); it copies only to plan
// a claim txn, when a seat is free. Tested without etcd, by the bytes
// allocated per look at a pool of 10,000 held seats.
func TestHeadLookIsO1InFullPool(t *testing.T) {
	const held = 10_000
	perLook := func(capacity int) uint64 {
		k := keys{root: "/t"}
		st := newPoolState(k, "p")
		kvs := []*mvccpb.KeyValue{{Key: []byte(k.spec("p")), Value: []byte(fmt.Sprintf(`{"capacity":%d}`, capacity)), CreateRevision: 1, ModRevision: 1, Version: 1}}
		for n := range held {
			rev := int64(2 + n)
			kvs = append(kvs, &mvccpb.KeyValue{Key: []byte(k.seat("p", n, queueName(1, uint64(n)))), Value: []byte(`{"tenantSlot":-1,"bindSlot":-1}`),
				CreateRevision: rev, ModRevision: rev, Version: 1, Lease: 1})
		}
		qrev := int64(held + 2)
		qkey := k.queueKey("p", 2, 7)
		kvs = append(kvs, &mvccpb.KeyValue{Key: []byte(qkey), Value: []byte(`{"holder":"w","since":"2026-12-01T00:00:00Z"}`),
			CreateRevision: qrev, ModRevision: qrev, Version: 1, Lease: 2})
		st.load(qrev, kvs)
		h := &headTurn{c: &Coordinator{k: k}, pool: "p",
			req: claimRequest{opts: claimOptions{holder: "w"}, lease: 2, nonce: 7, queueKey: qkey, queueRev: qrev}}
		const looks = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range looks {
			if h.look(st) == nil {
				t.Fatal("look returned no act")
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / looks
	}
	full, free := perLook(held), perLook(held+1)
	t.Logf("bytes allocated per look at %d held seats: %d with the pool full, %d with a seat free (a copy to plan on)", held, full, free)
	if free < 256<<10 {
		t.Fatalf("a look with a seat free allocated %d bytes: the copy it plans on should cost far more; the measure is broken", free)
	}
	if full > 32<<10 {
		t.Errorf("a look at a full pool allocated %d bytes: it copies the pool on every change", full)
	}
}
