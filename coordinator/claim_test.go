package coordinator_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestConcurrentClaimsDoNotCollide: claimants of one process that claim at
// once, on a pool whose state the process holds, choose different free
// seats, so each needs one txn. Choosing at random among the free seats,
// eight claims on eight seats collided with all but 8!/8^8 of the time.
func TestConcurrentClaimsDoNotCollide(t *testing.T) {
	m := &countingMetrics{}
	cli := newClient(t)
	c := testkit.Coordinator(t, cli, coordinator.WithMetrics(m), coordinator.WithPrefix(fmt.Sprintf("/collide/%d", time.Now().UnixNano())))
	ctx := testkit.Ctx(t, 30*time.Second)
	const n = 8
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: n})
	sessions := make([]*coordinator.Session, n)
	for i := range sessions {
		sessions[i] = testkit.Session(t, cli, 30*time.Second)
		// Each session's first claim loads the pool and its fence.
		if err := mustClaim(t, ctx, c, sessions[i], "p").Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 5 {
		before := m.txns.Load()
		start := make(chan struct{})
		claims := make(chan *coordinator.Claim, n)
		var wg sync.WaitGroup
		for _, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				cl, err := c.Claim(ctx, s, "p")
				if err != nil {
					t.Error(err)
				}
				claims <- cl
			}()
		}
		close(start)
		wg.Wait()
		close(claims)
		if txns := m.txns.Load() - before; txns != n {
			t.Errorf("round %d: %d claim txns for %d claims on %d free seats; want one each", round, txns, n, n)
		}
		for cl := range claims {
			if cl != nil {
				if err := cl.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestClaimReleaseCycle(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "hearing", coordinator.PoolSpec{Capacity: 2})
	s := testkit.Session(t, cli, 5*time.Second)

	a := mustClaim(t, ctx, c, s, "hearing", coordinator.WithHolder("alice"))
	b := mustClaim(t, ctx, c, s, "hearing", coordinator.WithHolder("bob"))
	if a.Seat() == b.Seat() || a.Token() == b.Token() {
		t.Fatalf("two claims share seat %d/%d token %d/%d", a.Seat(), b.Seat(), a.Token(), b.Token())
	}
	if _, err := c.Claim(ctx, s, "hearing"); !errors.Is(err, coordinator.ErrNoSeat) {
		t.Fatalf("third claim on capacity 2: got %v, want ErrNoSeat", err)
	}
	seats, err := c.Seats(ctx, "hearing")
	if err != nil || len(seats) != 2 || seats[0].TTL <= 0 {
		t.Fatalf("Seats = %+v, %v", seats, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("double release: got %v, want ErrNotHeld", err)
	}
	if !errors.Is(a.Err(), coordinator.ErrReleased) {
		t.Fatalf("released claim Err = %v", a.Err())
	}
	c2, err := c.Claim(ctx, s, "hearing")
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	st, err := c.PoolStatus(ctx, "hearing")
	if err != nil || st.Held != 2 || st.Free != 0 {
		t.Fatalf("status %+v %v", st, err)
	}
	_ = c2
}

// TestWaiterQueuesBehindClaimInFlight: a claimant that may wait, finding
// the only free seat chosen by a claim txn of its process still in
// flight, queues without a claim txn of its own (which could only
// collide), and is served once that seat is released.
func TestWaiterQueuesBehindClaimInFlight(t *testing.T) {
	m := &countingMetrics{}
	p := etcdtest.NewProxy(t, shared.Endpoint())
	cli := testkit.Client(t, p.URL())
	prefix := fmt.Sprintf("/inflight/%d", time.Now().UnixNano())
	c := testkit.Coordinator(t, cli, coordinator.WithMetrics(m), coordinator.WithPrefix(prefix))
	other := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, other, "p", coordinator.PoolSpec{Capacity: 1})
	first, second := testkit.Session(t, cli, 30*time.Second), testkit.Session(t, cli, 30*time.Second)
	for _, s := range []*coordinator.Session{first, second} { // load the pool and each fence
		if err := mustClaim(t, ctx, c, s, "p").Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := m.txns.Load()

	p.HoldResponses() // the first claim's txn stays in flight
	held := make(chan *coordinator.Claim, 1)
	go func() {
		cl, err := c.Claim(ctx, first, "p")
		if err != nil {
			t.Error(err)
		}
		held <- cl
	}()
	testkit.Eventually(t, 10*time.Second, "first claim txn sent", func() bool { return m.txns.Load() == before+1 })
	waiter := claimWaiting(t, ctx, c, second, "p")
	// Its enqueue reaches etcd through the held proxy; a claim txn of its
	// own would be counted.
	testkit.Eventually(t, 10*time.Second, "the waiter queued or sent a claim txn", func() bool {
		q, err := other.Queue(ctx, "p")
		return err == nil && len(q) == 1 || m.txns.Load() > before+1
	})
	if n := m.txns.Load() - before; n != 1 {
		t.Errorf("%d claim txns; want 1: the waiter queues behind the claim in flight rather than collide with it", n)
	}
	p.Deliver()
	holder := <-held
	if holder == nil {
		t.FailNow()
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if cl := <-waiter; cl == nil {
		t.Fatal("the waiter was not served")
	} else if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
