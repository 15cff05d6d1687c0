package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"path"
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
		granted := claimWaiting(t, ctx, c, s, "p")
		waitQueued(t, c, "p", 1)
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
	// A key of the pool written last, so the history below ends with it.
	end := c.Prefix() + "/pools/p/zz-end"
	if _, err := cli.Put(ctx, end, ""); err != nil {
		t.Fatal(err)
	}
	created := map[string]map[string]bool{}
	wch := cli.Watch(ctx, c.Prefix()+"/pools/p/", clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))
	for done := false; !done; {
		wr, ok := <-wch
		if !ok || wr.Err() != nil {
			t.Fatalf("history watch ended: %v", wr.Err())
		}
		for _, ev := range wr.Events {
			rest := strings.TrimPrefix(string(ev.Kv.Key), c.Prefix()+"/pools/p/")
			kind, _, _ := strings.Cut(rest, "/")
			if created[kind] == nil {
				created[kind] = map[string]bool{}
			}
			created[kind][rest] = true
			done = done || string(ev.Kv.Key) == end
		}
	}
	for _, kind := range []string{"seats", "queue"} {
		if len(created[kind]) == 0 {
			t.Errorf("no %s key in the history: the rounds did not run as planned", kind)
		}
	}
	for kind, keys := range created {
		t.Logf("%s: %d distinct keys", kind, len(keys))
		if kind == "grants" {
			t.Errorf("%d grant keys written: grants are found by the seat's name since v0.4", len(keys))
		}
		if (kind == "seats" || kind == "queue") && len(keys) > 4 {
			t.Errorf("%d distinct %s keys after 40 rounds by one session; want at most 4 (names reused)", len(keys), kind)
		}
	}
}

// TestNameInDoubtNotReused: a waiter that gives up while etcd is cut off
// cannot delete its queue key; the key outlives the Claim, and the reap
// that removes it later deletes by name. So that name must never be given
// to the session's next claim, whose keys the late delete would hit: the
// next claim gets a fresh name.
func TestNameInDoubtNotReused(t *testing.T) {
	p := etcdtest.NewProxy(t, shared.Endpoint())
	cli := testkit.Client(t, p.URL())
	prefix := fmt.Sprintf("/doubt/%d", time.Now().UnixNano())
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix), coordinator.WithCleanupTimeout(300*time.Millisecond))
	direct := newClient(t)
	other := testkit.Coordinator(t, direct, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, other, "p", coordinator.PoolSpec{Capacity: 1})
	holder := mustClaim(t, ctx, other, testkit.Session(t, direct, 30*time.Second), "p")
	s := testkit.Session(t, cli, 30*time.Second)
	names := func(seg string) []string {
		resp, err := direct.Get(ctx, prefix+"/pools/p/"+seg+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			out = append(out, path.Base(string(kv.Key)))
		}
		return out
	}

	// A clean give-up first: its name comes back (TestClaimNamesReused),
	// so the check below is not passed by a session that never reuses.
	gaveUp, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := c.Claim(gaveUp, s, "p", coordinator.WithWait()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter that gave up: %v", err)
	}
	cancel()
	waitCtx, giveUp := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := c.Claim(waitCtx, s, "p", coordinator.WithWait())
		waited <- err
	}()
	waitQueued(t, other, "p", 1)
	queued := names("queue")
	clean := queued[0]

	// Now give up while cut off: the queue key's delete cannot reach etcd.
	giveUp()
	<-waited
	waitCtx, giveUp = context.WithCancel(ctx)
	defer giveUp()
	go func() {
		_, err := c.Claim(waitCtx, s, "p", coordinator.WithWait())
		waited <- err
	}()
	waitQueued(t, other, "p", 1)
	if q := names("queue"); len(q) != 1 || q[0] != clean {
		t.Fatalf("queue %v: the session did not reuse the name %s of a claim that ended cleanly", q, clean)
	}
	p.Blackhole()
	giveUp()
	// Claim returns after its queue key's delete has failed (dequeue runs
	// before wait returns); the reap goes on in the background.
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter that gave up while cut off: %v", err)
	}
	p.Restore()
	testkit.Eventually(t, 20*time.Second, "the reap removes the queue key", func() bool { return len(names("queue")) == 0 })

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := mustClaim(t, ctx, c, s, "p")
	defer next.Release(ctx)
	if seats := names("seats/0000000"); len(seats) != 1 || seats[0] == clean {
		t.Fatalf("seat keys %v: the next claim took the name %s, left in doubt by a waiter cut off from etcd", seats, clean)
	}
}
