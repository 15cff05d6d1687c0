package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
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

// TestClaimNamesReused: the keys claims write are named after the claim,
// and etcd keeps every deleted key in its index until a compaction, where
// each range compare walks it. A session reuses the name of a claim that
// ended cleanly (names.go), so many cycles create few distinct keys: here
// direct claims, refusals, waiters that give up and waiters granted by a
// hand-off, 40 rounds of each, on a server that never compacts. With a new
// name per claim it would be about 80 distinct seat keys and 80 queue keys.
func TestClaimNamesReused(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix("/names"))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	s := testkit.Session(t, cli, 10*time.Second)
	start, err := cli.Get(ctx, "rev")
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		holder := mustClaim(t, ctx, c, s, "p")
		if _, err := c.Claim(ctx, s, "p"); !errors.Is(err, coordinator.ErrNoSeat) {
			t.Fatalf("claim on a full pool: %v, want ErrNoSeat", err)
		}
		gaveUp, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := c.Claim(gaveUp, s, "p", coordinator.WithWait())
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiter that gave up: %v, want the deadline", err)
		}
		granted := make(chan *coordinator.Claim, 1)
		go func() {
			cl, err := c.Claim(ctx, s, "p", coordinator.WithWait())
			if err != nil {
				t.Error(err)
			}
			granted <- cl
		}()
		for q, _ := c.Queue(ctx, "p"); len(q) == 0; q, _ = c.Queue(ctx, "p") {
			time.Sleep(time.Millisecond)
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-granted
		if next == nil {
			t.FailNow()
		}
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	end, err := cli.Get(ctx, "rev")
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]map[string]bool{}
	wch := cli.Watch(ctx, c.Prefix()+"/pools/p/", clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))
	for rev := start.Header.Revision; rev < end.Header.Revision; {
		wr := <-wch
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			rest := strings.TrimPrefix(string(ev.Kv.Key), c.Prefix()+"/pools/p/")
			kind, _, _ := strings.Cut(rest, "/")
			if created[kind] == nil {
				created[kind] = map[string]bool{}
			}
			created[kind][rest] = true
			rev = ev.Kv.ModRevision
		}
	}
	for kind, keys := range created {
		t.Logf("%s: %d distinct keys", kind, len(keys))
		if (kind == "seats" || kind == "queue" || kind == "grants") && len(keys) > 4 {
			t.Errorf("%d distinct %s keys after 40 rounds by one session; want at most 4 (names reused)", len(keys), kind)
		}
	}
}
