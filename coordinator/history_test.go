package coordinator_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestKeysDoNotGrowWithHistory: many claim/release cycles by short-lived
// sessions on a large pool leave no more keys than the sessions still live
// need: seat numbers stay low and release records go with their sessions.
// The old schema kept one record per seat number ever released (about 600
// keys after this run).
func TestKeysDoNotGrowWithHistory(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100_000})
	pinned := testkit.Session(t, cli, 10*time.Second)
	mustClaim(t, ctx, c, pinned, "p") // one long-lived holder
	for range 40 {
		s, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range 15 {
			cl := mustClaim(t, ctx, c, s, "p")
			if cl.Seat() > 1+16 {
				t.Fatalf("seat %d chosen with 1 held; want a seat below held+16", cl.Seat())
			}
			if err := cl.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(ctx, c.Prefix()+"/pools/p/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	// spec + the pinned seat + its fence key.
	if len(resp.Kvs) > 3 {
		for _, kv := range resp.Kvs {
			t.Log(string(kv.Key))
		}
		t.Fatalf("%d keys left after 600 cycles with 1 seat held; want at most 3", len(resp.Kvs))
	}
}
