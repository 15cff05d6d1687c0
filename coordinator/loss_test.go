package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// trials returns how many trials a fault test runs: short in the default
// suite, ETCDPOOL_TRIALS when set (the long mode in the README uses 200).
func trials(t testing.TB, short int) int {
	if v := os.Getenv("ETCDPOOL_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ETCDPOOL_TRIALS=%q: want a positive number", v)
		}
		return n
	}
	return short
}

// txnClock records, on the client's side, when each Txn that committed at a
// revision was SENT. The commit happened after that instant, so "x happened
// before the send of the txn at rev" proves x happened before its commit.
type txnClock struct {
	mu   sync.Mutex
	sent map[int64]time.Time
}

func (tc *txnClock) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	at := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if r, ok := reply.(*pb.TxnResponse); ok && err == nil && r.Succeeded {
		tc.mu.Lock()
		tc.sent[r.Header.Revision] = at
		tc.mu.Unlock()
	}
	return err
}

func (tc *txnClock) sentAt(rev int64) (time.Time, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	at, ok := tc.sent[rev]
	return at, ok
}

func newClockedClient(t testing.TB, endpoint string) (*clientv3.Client, *txnClock) {
	t.Helper()
	tc := &txnClock{sent: map[int64]time.Time{}}
	return newObservedClient(t, endpoint, tc.intercept), tc
}

// TestLossBeforeRegrant: a holder cut off from etcd (a blackhole, longer
// than its TTL) must see Claim.Done close before its seat is granted to the
// waiter queued behind it. The regrant's commit is bounded below by the
// instant the waiter sent that txn, on the same monotonic clock. It must hold
// in every trial; the margin left is logged.
func TestLossBeforeRegrant(t *testing.T) {
	cl := etcdtest.Start(t)
	n := trials(t, 4)
	var gaps []time.Duration
	for i := range n {
		gaps = append(gaps, lossTrial(t, cl, i))
	}
	slices.Sort(gaps)
	t.Logf("%d trials: Claim.Done closed before the regrant's txn was sent by min %v, median %v, max %v",
		n, gaps[0], gaps[len(gaps)/2], gaps[len(gaps)-1])
}

func lossTrial(t *testing.T, cl *etcdtest.Cluster, i int) time.Duration {
	ctx := testkit.Ctx(t, 30*time.Second)
	proxy := etcdtest.NewProxy(t, cl.Endpoint(0))
	hcli := newClient(t, proxy.URL())
	wcli, clock := newClockedClient(t, cl.Endpoint(0))
	hc, wc := testkit.Coordinator(t, hcli), testkit.Coordinator(t, wcli)
	pool := fmt.Sprintf("loss%d", i)
	testkit.CreatePool(t, wc, pool, coordinator.PoolSpec{Capacity: 1})

	hs := testkit.Session(t, hcli, 2*time.Second)
	held := mustClaim(t, ctx, hc, hs, pool)
	doneAt := make(chan time.Time, 1)
	go func() { <-held.Done(); doneAt <- time.Now() }()

	type result struct {
		cl  *coordinator.Claim
		err error
	}
	got := make(chan result, 1)
	ws := testkit.Session(t, wcli, 10*time.Second)
	go func() {
		c, err := wc.Claim(ctx, ws, pool, coordinator.WithWait())
		got <- result{c, err}
	}()
	testkit.Eventually(t, 10*time.Second, "the waiter to queue", func() bool {
		q, err := wc.Queue(ctx, pool)
		return err == nil && len(q) == 1
	})

	proxy.Blackhole()
	r := <-got
	proxy.Restore()
	if r.err != nil {
		t.Fatalf("trial %d: waiter: %v", i, r.err)
	}
	sent, ok := clock.sentAt(r.cl.Token())
	if !ok {
		t.Fatalf("trial %d: no record of the regrant txn at revision %d", i, r.cl.Token())
	}
	var closed time.Time
	select {
	case closed = <-doneAt:
	default:
		t.Fatalf("trial %d: seat granted again (txn sent %s) while the cut-off holder's Done is still open",
			i, sent.Format("15:04:05.000"))
	}
	if !closed.Before(sent) {
		t.Fatalf("trial %d: holder's Done closed %v AFTER the regrant txn was sent", i, closed.Sub(sent))
	}
	if err := held.Err(); !errors.Is(err, coordinator.ErrSessionExpired) {
		t.Fatalf("trial %d: holder's Err = %v, want ErrSessionExpired", i, err)
	}
	_ = r.cl.Release(ctx)
	return sent.Sub(closed)
}

// TestHeldClaimReplyIsNotAGrant: the claim txn reaches etcd and commits, but
// its answer is held back past the session's deadline (the keepalives'
// answers are held too). Claim must return ErrSessionExpired, promptly, and
// never a claim: by the time the answer could arrive the seat may be
// someone else's.
func TestHeldClaimReplyIsNotAGrant(t *testing.T) {
	cl := etcdtest.Start(t)
	direct := cl.Client(t)
	obs := testkit.Coordinator(t, direct)
	var late []time.Duration
	for i := range trials(t, 3) {
		ctx := testkit.Ctx(t, 30*time.Second) // per trial: the long mode runs hundreds
		pool := fmt.Sprintf("held%d", i)
		testkit.CreatePool(t, obs, pool, coordinator.PoolSpec{Capacity: 1})
		proxy := etcdtest.NewProxy(t, cl.Endpoint(0))
		cli := newClient(t, proxy.URL())
		c := testkit.Coordinator(t, cli)
		s := testkit.Session(t, cli, 2*time.Second)
		warm := mustClaim(t, ctx, c, s, pool) // warm the connection and the pool cache
		if err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}
		proxy.HoldResponses()
		claim, err := c.Claim(ctx, s, pool)
		returned := time.Now()
		if err == nil {
			t.Fatalf("trial %d: Claim returned seat %d although its answer was held past the deadline", i, claim.Seat())
		}
		if !errors.Is(err, coordinator.ErrSessionExpired) {
			t.Fatalf("trial %d: Claim: %v, want ErrSessionExpired", i, err)
		}
		late = append(late, returned.Sub(s.Deadline()))
		st, err := obs.PoolStatus(ctx, pool)
		if err != nil || st.Held != 1 {
			t.Fatalf("trial %d: the held txn should have committed: held %d, %v", i, st.Held, err)
		}
		proxy.Deliver()
		testkit.Eventually(t, 10*time.Second, "the orphaned seat to free", func() bool {
			st, err := obs.PoolStatus(ctx, pool)
			return err == nil && st.Held == 0
		})
		proxy.Restore()
	}
	checkPrompt(t, "Claim with a held answer", late)
}

// TestWaitingClaimEndsAtDeadline: a queued claimant cut off from etcd must
// return ErrSessionExpired within about 100 ms of its session's deadline,
// not when etcd answers again.
func TestWaitingClaimEndsAtDeadline(t *testing.T) {
	cl := etcdtest.Start(t)
	direct := cl.Client(t)
	obs := testkit.Coordinator(t, direct)
	var late []time.Duration
	for i := range trials(t, 3) {
		ctx := testkit.Ctx(t, 30*time.Second) // per trial: the long mode runs hundreds
		pool := fmt.Sprintf("wait%d", i)
		testkit.CreatePool(t, obs, pool, coordinator.PoolSpec{Capacity: 1})
		mustClaim(t, ctx, obs, testkit.Session(t, direct, 10*time.Second), pool)
		proxy := etcdtest.NewProxy(t, cl.Endpoint(0))
		cli := newClient(t, proxy.URL())
		c := testkit.Coordinator(t, cli)
		s := testkit.Session(t, cli, 2*time.Second)
		errc := waitingClaim(ctx, c, s, pool)
		testkit.Eventually(t, 10*time.Second, "the claimant to queue", func() bool {
			q, err := obs.Queue(ctx, pool)
			return err == nil && len(q) == 1
		})
		proxy.Blackhole()
		err := <-errc
		returned := time.Now()
		proxy.Restore()
		if !errors.Is(err, coordinator.ErrSessionExpired) {
			t.Fatalf("trial %d: waiting Claim: %v, want ErrSessionExpired", i, err)
		}
		late = append(late, returned.Sub(s.Deadline()))
	}
	checkPrompt(t, "waiting Claim", late)
}

// checkPrompt fails if a return came more than a generous bound after the
// session's deadline (the target is ~100 ms; the bound allows a loaded CI
// machine), and logs the figures.
func checkPrompt(t *testing.T, what string, late []time.Duration) {
	t.Helper()
	slices.Sort(late)
	t.Logf("%s returned after the session deadline: median %v, max %v (%d trials)", what, late[len(late)/2], late[len(late)-1], len(late))
	if late[len(late)-1] > time.Second {
		t.Fatalf("%s returned %v after the session deadline; want about 100 ms", what, late[len(late)-1])
	}
}
