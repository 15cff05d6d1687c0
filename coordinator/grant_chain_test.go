package coordinator

import (
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestBatchChainFitsTxnLimit: the head's grants nest in a chain, and etcd
// counts the operations along it against --max-txn-ops (the largest of
// each txn's compares, Then and Else, summed down the chain). With 17
// waiters that each bind to an instance under a tenant limit, a grant
// costs 9 compares, and 16 of them would exceed 128: the batch must stop
// within the limit. Unconstrained waiters (5 compares a grant) still fill
// a batch of maxGrants. Tested without etcd, on a planned batch.
func TestBatchChainFitsTxnLimit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		constrained bool
	}{{"unconstrained", false}, {"tenant and instance", true}} {
		t.Run(tc.name, func(t *testing.T) {
			k := keys{root: "/t"}
			const n = 17
			kvs := []*mvccpb.KeyValue{{Key: []byte(k.spec("p")), Value: []byte(fmt.Sprintf(`{"capacity":%d,"tenantLimit":1}`, n)),
				CreateRevision: 1, ModRevision: 1, Version: 1}}
			if tc.constrained {
				kvs = append(kvs, &mvccpb.KeyValue{Key: []byte(k.instance("p", "i")), Value: []byte(fmt.Sprintf(`{"id":"i","seats":%d}`, n)),
					CreateRevision: 2, ModRevision: 2, Version: 1, Lease: 1})
			}
			for i := range n {
				v := `{"holder":"w","since":"2026-12-01T00:00:00Z"}`
				if tc.constrained {
					v = fmt.Sprintf(`{"holder":"w","tenant":"t%d","since":"2026-12-01T00:00:00Z"}`, i)
				}
				kvs = append(kvs, &mvccpb.KeyValue{Key: []byte(k.queueKey("p", clientv3.LeaseID(i+2), 7)), Value: []byte(v),
					CreateRevision: int64(3 + i), ModRevision: int64(3 + i), Version: 1, Lease: int64(i + 2)})
			}
			p := planHeadBatch(t, k, 3+n, kvs)
			sum, grants := txnOps(len(p.cmps), len(p.ops)+len(p.grants)), 0
			for ops := p.grants; len(ops) > 0; grants++ {
				if len(ops) != 1 || !ops[0].IsTxn() {
					t.Fatalf("grant %d: %d ops; want one nested txn", grants, len(ops))
				}
				cmps, then, _ := ops[0].Txn()
				sum += max(len(cmps), len(then))
				ops = nil
				for _, op := range then {
					if op.IsTxn() {
						ops = append(ops, op)
					}
				}
			}
			if sum > maxTxnOps {
				t.Fatalf("%d grants chained: %d ops along the chain; etcd allows %d", grants, sum, maxTxnOps)
			}
			if !tc.constrained && grants != maxGrants {
				t.Fatalf("%d grants behind the head; want %d", grants, maxGrants)
			}
			if tc.constrained && (grants == 0 || grants == maxGrants) {
				t.Fatalf("%d grants behind the head (%d ops along the chain); want the batch cut short by the limit", grants, sum)
			}
			t.Logf("%d grants, %d ops along the chain", grants, sum)
		})
	}
}

// TestBatchProofSkipsOwnSlots: a batch grants w1 tenant a's last slot,
// then passes over w2 of tenant a (at its limit through w1's grant) and
// grants g. g's proof must not compare the slot w1's grant creates in the
// same txn: etcd evaluates every compare before any write, so that compare
// would fail and g's grant never apply. Tested without etcd.
func TestBatchProofSkipsOwnSlots(t *testing.T) {
	k := keys{root: "/t"}
	kvs := []*mvccpb.KeyValue{{Key: []byte(k.spec("p")), Value: []byte(`{"capacity":4,"tenantLimits":{"a":1}}`),
		CreateRevision: 1, ModRevision: 1, Version: 1}}
	for i, v := range []string{
		`{"holder":"head","since":"2026-12-01T00:00:00Z"}`,
		`{"holder":"w1","tenant":"a","since":"2026-12-01T00:00:00Z"}`,
		`{"holder":"w2","tenant":"a","since":"2026-12-01T00:00:00Z"}`,
		`{"holder":"g","since":"2026-12-01T00:00:00Z"}`,
	} {
		kvs = append(kvs, &mvccpb.KeyValue{Key: []byte(k.queueKey("p", clientv3.LeaseID(i+2), 7)), Value: []byte(v),
			CreateRevision: int64(2 + i), ModRevision: int64(2 + i), Version: 1, Lease: int64(i + 2)})
	}
	p := planHeadBatch(t, k, 5, kvs)
	var leases []int64
	slotA := slotPrefix(k.tenants("p", "a"), 0)
	for ops := p.grants; len(ops) == 1 && ops[0].IsTxn(); {
		cmps, then, _ := ops[0].Txn()
		for _, c := range cmps {
			if pc := c.GetCompare(); string(pc.Key) == slotA && pc.Result == pb.Compare_GREATER {
				t.Fatalf("a grant compares that tenant a's slot %s is held, a slot this very txn creates", slotA)
			}
		}
		leases = append(leases, leaseOf(then))
		ops = nil
		for _, op := range then {
			if op.IsTxn() {
				ops = append(ops, op)
			}
		}
	}
	if fmt.Sprint(leases) != "[3 5]" {
		t.Fatalf("grants behind the head to leases %v; want w1 (3) and g (5), w2 passed over", leases)
	}
}

// leaseOf returns the lease a grant's writes are named after (keys.go).
func leaseOf(then []clientv3.Op) int64 {
	for _, op := range then {
		if op.IsPut() {
			key := string(op.KeyBytes())
			return int64(leaseOfHex(key[strings.LastIndexByte(key, '/')+1:]))
		}
	}
	return 0
}

// planHeadBatch loads kvs at rev into a state of pool "p" and plans the
// batch of the first waiter in line, as its head, with grants behind it.
func planHeadBatch(t *testing.T, k keys, rev int64, kvs []*mvccpb.KeyValue) *claimPlan {
	t.Helper()
	st := newPoolState(k, "p")
	st.load(rev, kvs)
	head, ok := st.waiterRequest(st.line[0])
	if !ok {
		t.Fatal("the head's queue key does not decode")
	}
	head.granted = false
	p, err := st.planBatch(head, maxTxnOps)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
