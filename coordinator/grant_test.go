package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// TestFreedSeatsAreGrantedTogether: when k seats free at once (a holder of k
// seats dies), the first k waiters are granted together, in one claim txn
// of the head's, in queue order, and the rest keep waiting: no seat sits
// idle while a compatible waiter waits.
func TestFreedSeatsAreGrantedTogether(t *testing.T) {
	m := &countingMetrics{}
	c, cli := newCoord(t, coordinator.WithMetrics(m))
	ctx := testkit.Ctx(t, 60*time.Second)
	const capacity, waiters = 6, 9
	dying := fullPool(t, ctx, c, cli, capacity)
	granted := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Claim(ctx, testkit.Session(t, cli, 10*time.Second), "p", coordinator.WithWait(), coordinator.WithHolder(fmt.Sprint(i)))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			granted <- i
		}()
		waitQueued(t, c, "p", i+1) // arrival order is i
	}
	txns := m.txns.Load()
	if _, err := cli.Revoke(ctx, dying.Lease()); err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	for range capacity {
		select {
		case i := <-granted:
			got[i] = true
		case <-ctx.Done():
			t.Fatalf("only %d of %d freed seats were granted", len(got), capacity)
		}
	}
	for i := range capacity {
		if !got[i] {
			t.Fatalf("granted %v; want the first %d waiters in queue order", got, capacity)
		}
	}
	if n := m.txns.Load() - txns; n > 2 {
		t.Fatalf("%d seats freed at once took %d claim txns; want them granted together", capacity, n)
	}
	q, err := c.Queue(ctx, "p")
	if err != nil || len(q) != waiters-capacity {
		t.Fatalf("queue after the grants: %d waiters (%v), want %d", len(q), err, waiters-capacity)
	}
	st, err := c.PoolStatus(ctx, "p")
	if err != nil || st.Held != capacity {
		t.Fatalf("held %d (%v), want %d", st.Held, err, capacity)
	}
	// The rest are served as the granted seats are given back.
	seats, err := c.Seats(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range seats {
		if _, err := c.ForceRelease(ctx, "p", s.Seat, s.Token, "test"); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// TestFIFOHistory: unconstrained claimants with their own sessions cycle
// through a small pool while its capacity changes and sessions are revoked.
// The history checker replays every revision: capacity is never exceeded
// and no waiter is granted while an older one still waits.
func TestFIFOHistory(t *testing.T) {
	cl := etcdtest.Start(t)
	cli := cl.Client(t)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix("/fifo"))
	ctx := testkit.Ctx(t, 4*time.Minute)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 3})
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	h, wch := watchHistory(wctx, t, cli, "/fifo/pools/p/")
	target := int64(300 * trials(t, 4))
	var grants atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	sessions := make([]atomic.Pointer[coordinator.Session], 24)
	for w := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fifoWorker(runCtx, t, c, cli, &sessions[w], &grants, target, stop)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; runCtx.Err() == nil; i++ {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := c.UpdatePool(runCtx, "p", coordinator.PoolSpec{Capacity: 2 + rand.IntN(5)}, 0); err != nil && runCtx.Err() == nil {
				t.Errorf("update pool: %v", err)
			}
			if s := sessions[rand.IntN(len(sessions))].Load(); s != nil && i%2 == 0 {
				_, _ = cli.Revoke(runCtx, s.Lease())
			}
		}
	}()
	wg.Wait()
	h.checkUntilNow(ctx, cli, wch)
	t.Logf("%d grants replayed; %d grants to waiters checked for FIFO", h.grants, h.fifo)
	if h.fifo < int(target)/4 {
		t.Fatalf("only %d grants to waiters checked; the test did not queue", h.fifo)
	}
}

func fifoWorker(ctx context.Context, t *testing.T, c *coordinator.Coordinator, cli *clientv3.Client,
	slot *atomic.Pointer[coordinator.Session], grants *atomic.Int64, target int64, stop func()) {
	for ctx.Err() == nil {
		s := workerSession(ctx, cli, slot)
		if s == nil {
			continue
		}
		claim, err := c.Claim(ctx, s, "p", coordinator.WithWait())
		switch {
		case err == nil:
		case errors.Is(err, coordinator.ErrSessionExpired), ctx.Err() != nil:
			continue
		default:
			t.Errorf("claim: %v", err)
			return
		}
		if grants.Add(1) >= target {
			stop()
		}
		time.Sleep(time.Duration(rand.IntN(2)) * time.Millisecond)
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := claim.Release(rctx); err != nil && !errors.Is(err, coordinator.ErrNotHeld) {
			t.Errorf("release: %v", err)
		}
		cancel()
	}
}

// TestCloseEndsWaitingClaims: Close of the Coordinator ends a waiting
// Claim with ErrClosed at once, and its queue key does not linger.
func TestCloseEndsWaitingClaims(t *testing.T) {
	cli := newClient(t)
	prefix := fmt.Sprintf("/closewait/%d", time.Now().UnixNano()) // -count=N reruns on the same etcd
	c, err := coordinator.New(cli, coordinator.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	obs := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, obs, "p", coordinator.PoolSpec{Capacity: 1})
	mustClaim(t, ctx, obs, testkit.Session(t, cli, 10*time.Second), "p")
	errc := waitingClaim(ctx, c, testkit.Session(t, cli, 10*time.Second), "p")
	waitQueued(t, obs, "p", 1)
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, coordinator.ErrClosed) {
			t.Fatalf("waiting Claim after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting Claim did not end when its Coordinator was closed")
	}
	waitQueued(t, obs, "p", 0)
}

// TestGiveUpRacingGrant: a release hands the seat to a waiter, which gives
// up before it sees the grant. Its dequeue finds its queue key gone, looks
// for a seat under its own name, and releases it: nothing stays held under
// the lease of a claimant that returned an error.
func TestGiveUpRacingGrant(t *testing.T) {
	var txns atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(*pb.TxnRequest); ok {
			txns.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	p := etcdtest.NewProxy(t, shared.Endpoint())
	cli := newObservedClient(t, p.URL(), count)
	prefix := fmt.Sprintf("/giveup/%d", time.Now().UnixNano())
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(prefix))
	other := testkit.Coordinator(t, newClient(t), coordinator.WithPrefix(prefix))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, other, "p", coordinator.PoolSpec{Capacity: 1})
	holder := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	ws := testkit.Session(t, cli, 30*time.Second)
	wctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	done := waitingClaim(wctx, c, ws, "p", coordinator.WithHolder("w"))
	waitQueued(t, other, "p", 1)
	feedShowsWaiter(t, c, "p", ws.Lease())

	p.HoldResponses() // from here the waiter's feed sees nothing
	released := make(chan error, 1)
	go func() { released <- holder.Release(ctx) }()
	testkit.Eventually(t, 10*time.Second, "the seat handed to the waiter", func() bool {
		seats, err := other.Seats(ctx, "p")
		return err == nil && len(seats) == 1 && seats[0].Holder == "w"
	})
	before := txns.Load()
	giveUp()
	testkit.Eventually(t, 10*time.Second, "the waiter's dequeue sent", func() bool { return txns.Load() > before })
	p.Deliver()
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter that gave up: %v, want context.Canceled", err)
	}
	testkit.Eventually(t, 10*time.Second, "the seat granted to the waiter that gave up freed", func() bool {
		seats, err := other.Seats(ctx, "p")
		return err == nil && len(seats) == 0
	})
}
