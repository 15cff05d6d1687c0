package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// startAgent runs an agent named name for cfg until stop is called or the
// test ends; stop cancels its context (what SIGTERM does in poolagent) and
// returns Run's error once the drain is over.
func startAgent(t *testing.T, co *coordinator.Coordinator, name string, cfg config.Agent, opts ...Option) (a *Agent, stop func() error) {
	t.Helper()
	cfg.Name = name
	a = New(co, cfg, append([]Option{WithPollInterval(50 * time.Millisecond), WithOwnerCheckInterval(100 * time.Millisecond)}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var err error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return a, stop
}

// claimKept fails the test if cl has ended or its seat no longer carries
// its token.
func claimKept(t *testing.T, co *coordinator.Coordinator, cl *coordinator.Claim, when string) {
	t.Helper()
	select {
	case <-cl.Done():
		t.Fatalf("%s: the holder lost its seat: %v", when, cl.Err())
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	seats, err := co.Seats(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range seats {
		if s.Seat == cl.Seat() && s.Token == cl.Token() && s.Instance == "i1" {
			return
		}
	}
	t.Fatalf("%s: seat %d with token %d is gone: %+v", when, cl.Seat(), cl.Token(), seats)
}

// TestRolloutTakeoverKeepsHolders is a Deployment's rolling update: agent
// A holds i1 with a holder on it, agent B starts with the same instances
// and takeover on (both have it, as the manifest gives both pods the same
// flags), then A is stopped as SIGTERM stops it. The holder must keep its
// seat throughout, A must say it no longer owns i1 and must not take it
// back, and A's drain must neither change nor delete B's instance.
func TestRolloutTakeoverKeepsHolders(t *testing.T) {
	_, cli, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2})
	cfg.DrainTimeout = config.Duration(20 * time.Second) // a drain that waited for the holder would show
	a, stopA := startAgent(t, co, "a", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "A registered", func() bool { return a.Status().Registered })
	cl := testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithInstance("i1"))

	b, _ := startAgent(t, co, "b", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B registered", func() bool { return b.Status().Registered })
	if in := instanceMap(t, co)["i1"]; in.Lease != b.Status().Lease || in.Agent != "b" || in.State != coordinator.InstanceReady {
		t.Fatalf("i1 after B started: %+v, want B's lease %x, ready", in, b.Status().Lease)
	}
	claimKept(t, co, cl, "after the takeover")

	srv := httptest.NewServer(a.Handler(nil))
	defer srv.Close()
	testkit.Eventually(t, 5*time.Second, "A to see i1 taken over", func() bool { return len(a.Status().Foreign) == 1 })
	code, body := getBody(t, srv.URL+ReadyzPath)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "not the owner of p/i1") || !strings.Contains(body, `agent "b"`) {
		t.Errorf("A's /readyz = %d %q, want 503 naming p/i1 and agent b", code, body)
	}
	// A's checks run every 100ms; ten of them must leave B's key alone.
	rev := instanceMap(t, co)["i1"].Revision
	testkit.Consistently(t, time.Second, "B's registration untouched", func() bool {
		return instanceMap(t, co)["i1"].Revision == rev
	})

	start := time.Now()
	if err := stopA(); err != nil {
		t.Fatalf("A's Run: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("A's drain took %v: it waited for seats on an instance it no longer holds", took)
	}
	if in := instanceMap(t, co)["i1"]; in.Revision != rev || in.Lease != b.Status().Lease {
		t.Errorf("A's drain wrote B's instance: %+v (revision was %d)", in, rev)
	}
	claimKept(t, co, cl, "after A drained")
	testkit.Consistently(t, time.Second, "the holder keeps its seat", func() bool {
		select {
		case <-cl.Done():
			return false
		default:
			return true
		}
	})
	claimKept(t, co, cl, "a second after A drained")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if err := cl.Release(ctx); err != nil { // else B's drain waits for it
		t.Fatal(err)
	}
}

// TestSecondAgentWaitsWithoutTakeover starts B with A's instances and no
// takeover: B must leave them to A, say so on /readyz, and register them
// as soon as A's drain deletes them.
func TestSecondAgentWaitsWithoutTakeover(t *testing.T) {
	_, _, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	a, stopA := startAgent(t, co, "a", cfg)
	testkit.Eventually(t, 10*time.Second, "A registered", func() bool { return a.Status().Registered })
	b, _ := startAgent(t, co, "b", cfg)
	srv := httptest.NewServer(b.Handler(nil))
	defer srv.Close()
	testkit.Eventually(t, 10*time.Second, "B to see i1 held by A", func() bool { return len(b.Status().Foreign) == 1 })
	if code, body := getBody(t, srv.URL+ReadyzPath); code != http.StatusServiceUnavailable || !strings.Contains(body, `agent "a"`) {
		t.Errorf("B's /readyz = %d %q, want 503 naming agent a", code, body)
	}
	if in := instanceMap(t, co)["i1"]; in.Lease != a.Status().Lease {
		t.Fatalf("B wrote A's instance: %+v", in)
	}
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	took := testkit.Eventually(t, 10*time.Second, "B registered once A drained", func() bool { return b.Status().Registered })
	t.Logf("B registered %v after A's drain", took)
	if in := instanceMap(t, co)["i1"]; in.Lease != b.Status().Lease || in.Agent != "b" {
		t.Errorf("i1 after A drained: %+v, want B's", in)
	}
}

// TestRestartedAgentTakesOverItsEarlierRun registers i1, with a holder, as
// an earlier run of agent "test" that died without revoking its lease
// would leave it: a new run with the same name takes it over without the
// takeover option, and the holder keeps its seat.
func TestRestartedAgentTakesOverItsEarlierRun(t *testing.T) {
	_, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	earlier := testkit.Session(t, cli, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := co.RegisterInstance(ctx, "p", earlier.Lease(), coordinator.Instance{ID: "i1", Agent: "test"}); err != nil {
		t.Fatal(err)
	}
	cl := testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithInstance("i1"))
	a, _ := startAgent(t, co, "test", agentConfig(config.Instance{Pool: "p", ID: "i1"}))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	if in := instanceMap(t, co)["i1"]; in.Lease != a.Status().Lease {
		t.Fatalf("i1 %+v, want the new run's lease %x", in, a.Status().Lease)
	}
	if err := earlier.Close(ctx); err != nil { // the earlier run's lease expires
		t.Fatal(err)
	}
	claimKept(t, co, cl, "after the earlier run's lease ended")
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestTakeoverRetriedAfterLostRace: as a restarted agent takes i1 over
// from its earlier run's lease, that run moves the key to another lease
// of its own (it renewed its session), so the takeover's compare-and-swap
// fails. The agent tries again and takes the key from the new lease.
// Before 2026-12-05 it recorded the new lease as a foreign owner and never
// tried again: /readyz failed for as long as that lease lived.
func TestTakeoverRetriedAfterLostRace(t *testing.T) {
	c, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	earlier, renewed := testkit.Session(t, cli, 10*time.Second), testkit.Session(t, cli, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := co.RegisterInstance(ctx, "p", earlier.Lease(), coordinator.Instance{ID: "i1", Agent: "test"}); err != nil {
		t.Fatal(err)
	}
	var raced atomic.Bool
	moveFirst := func(ictx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if isTakeover(req) && raced.CompareAndSwap(false, true) {
			if _, err := co.TakeOverInstance(ctx, "p", &coordinator.InstanceOwnedError{Owner: earlier.Lease()}, renewed.Lease(), coordinator.Instance{ID: "i1", Agent: "test"}); err != nil {
				t.Errorf("moving i1 to the renewed lease: %v", err)
			}
		}
		return invoker(ictx, method, req, reply, cc, opts...)
	}
	racing := testkit.Coordinator(t, testkit.DialedClient(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(moveFirst)), coordinator.WithPrefix(co.Prefix()))
	a, _ := startAgent(t, racing, "test", agentConfig(config.Instance{Pool: "p", ID: "i1"}))
	testkit.Eventually(t, 10*time.Second, "registered after the lost race", func() bool { return a.Status().Registered })
	if !raced.Load() {
		t.Fatal("no takeover was sent: the race did not happen")
	}
	if in := instanceMap(t, co)["i1"]; in.Lease != a.Status().Lease {
		t.Fatalf("i1 %+v, want the agent's lease %x", in, a.Status().Lease)
	}
}

// isTakeover reports whether req is TakeOverInstance's txn: it alone
// compares an instance key's create revision greater than 0.
func isTakeover(req any) bool {
	tr, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, cmp := range tr.Compare {
		if cmp.Target == pb.Compare_CREATE && cmp.Result == pb.Compare_GREATER && strings.HasSuffix(string(cmp.Key), "/instances/i1") {
			return true
		}
	}
	return false
}

// TestUndoneRolloutOldAgentTakesBack: agent B took i1 over from A in a
// rollout, a holder on it; the rollout is undone, and B is stopped while A
// lives. B marks i1 draining as it stops (Stopping); A, which has i1 in
// its configuration, takes it back, so the holder keeps its seat, and B's
// drain, which no longer holds i1, ends without waiting for the holder.
// Before 2026-12-05 A never took back what it had held: B's drain waited
// its timeout and deregistered i1, and the holder lost its seat.
func TestUndoneRolloutOldAgentTakesBack(t *testing.T) {
	_, cli, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2})
	cfg.DrainTimeout = config.Duration(20 * time.Second) // a drain that waited for the holder would show
	// A checks its owners once a minute: the pool's draining event is what
	// tells it that B stops.
	a, _ := startAgent(t, co, "a", cfg, WithTakeover(true), WithOwnerCheckInterval(time.Minute))
	testkit.Eventually(t, 10*time.Second, "A registered", func() bool { return a.Status().Registered })
	b, stopB := startAgent(t, co, "b", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B registered", func() bool { return b.Status().Registered })
	cl := testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithInstance("i1"))
	_ = cl.Done() // watched: a deregistration of i1 would end it
	testkit.Eventually(t, 5*time.Second, "A to see i1 taken over", func() bool {
		return instanceMap(t, co)["i1"].Lease == b.Status().Lease
	})

	start := time.Now()
	if err := stopB(); err != nil {
		t.Fatalf("B's Run: %v", err)
	}
	took := time.Since(start)
	if took > 10*time.Second {
		t.Errorf("B's drain took %v: it waited for the holder of an instance A took back", took)
	}
	testkit.Eventually(t, 5*time.Second, "A to hold i1 again", func() bool {
		in := instanceMap(t, co)["i1"]
		return in.Lease == a.Status().Lease && in.State == coordinator.InstanceReady && !in.Stopping
	})
	claimKept(t, co, cl, "after B stopped")
	testkit.Eventually(t, 5*time.Second, "A registered, owning i1", func() bool { return a.Status().Registered })
	t.Logf("B's drain took %v", took)
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if err := cl.Release(ctx); err != nil { // else A's drain waits for it
		t.Fatal(err)
	}
}

// TestUnleasedKeyNotTakenAsStopping: a key of an instance in the agent's
// configuration, written by hand without a lease, is left alone by an
// agent without takeover that never held it (a stopping owner's lease is
// never 0). Found by a review (2026-12-05): it was taken over as if its
// agent were stopping.
func TestUnleasedKeyNotTakenAsStopping(t *testing.T) {
	_, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	key := coordinator.SegPrefix(co.Prefix(), "p", coordinator.SegInstances) + "i1"
	if _, err := cli.Put(ctx, key, `{"id":"i1","addr":"static:1","seats":1,"state":"ready","agent":"operator"}`); err != nil {
		t.Fatal(err)
	}
	a, _ := startAgent(t, co, "a", agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2}))
	testkit.Eventually(t, 5*time.Second, "a to see i1 held by another", func() bool { return len(a.Status().Foreign) == 1 })
	testkit.Consistently(t, time.Second, "the unleased key left alone", func() bool {
		in := instanceMap(t, co)["i1"]
		return in.Lease == 0 && in.Agent == "operator"
	})
}

// TestAgentStartedAfterStopMarkTakesOver: an agent that starts while the
// instance's agent drains it to stop takes it over at its first
// registration, not at its first owner check (here a minute away), its
// holder keeping the seat.
func TestAgentStartedAfterStopMarkTakesOver(t *testing.T) {
	_, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	stopping := testkit.Session(t, cli, 10*time.Second)
	if _, err := co.RegisterInstance(ctx, "p", stopping.Lease(), coordinator.Instance{ID: "i1", Addr: "h:1", Seats: 2, Agent: "b"}); err != nil {
		t.Fatal(err)
	}
	cl := testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithInstance("i1"))
	_ = cl.Done()
	if _, err := co.SetInstanceStateIfOwner(ctx, "p", "i1", stopping.Lease(), coordinator.InstanceDraining); err != nil { // b's drain
		t.Fatal(err)
	}
	a, _ := startAgent(t, co, "a", agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2}), WithOwnerCheckInterval(time.Minute))
	testkit.Eventually(t, 5*time.Second, "a to take i1 over", func() bool {
		in := instanceMap(t, co)["i1"]
		return in.Lease == a.Status().Lease && in.State == coordinator.InstanceReady
	})
	claimKept(t, co, cl, "after the take-over")
	if err := cl.Release(ctx); err != nil { // else a's drain waits for it
		t.Fatal(err)
	}
}

// TestRestartKeepsOperatorDrain: an operator drains i1 (poolctl drain);
// its agent then crashes and is restarted (the same name) while the old
// lease still lives. The restarted agent takes the key over from its
// earlier run, and must keep the operator's drain: no new claim may land
// on i1. Found by a review (2026-12-05): it wrote i1 ready.
func TestRestartKeepsOperatorDrain(t *testing.T) {
	_, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	earlier := testkit.Session(t, cli, 10*time.Second) // the crashed run's lease
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if _, err := co.RegisterInstance(ctx, "p", earlier.Lease(), coordinator.Instance{ID: "i1", Agent: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := co.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil { // poolctl drain p i1
		t.Fatal(err)
	}
	a, _ := startAgent(t, co, "test", agentConfig(config.Instance{Pool: "p", ID: "i1"}))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	in := instanceMap(t, co)["i1"]
	if in.State != coordinator.InstanceDraining || in.Lease != a.Status().Lease {
		t.Errorf("after the agent's restart i1 is %q under lease %x (the agent's: %x), want draining under the agent's: the operator's drain was undone",
			in.State, in.Lease, a.Status().Lease)
	}
	if cl, err := co.Claim(ctx, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithInstance("i1")); err == nil {
		t.Errorf("a new claim landed on the operator-drained instance i1: seat %d token %d", cl.Seat(), cl.Token())
	}
}

// TestLeaseLossKeepsOperatorDrain: an operator drains i1; the agent is
// then cut off from etcd past its session's local deadline while its
// lease lives on (kept alive from elsewhere here, as a partition shorter
// than the TTL plus the margin leaves it, or a leader change's lease
// refresh). Healed, the agent opens a new session and takes i1 over from
// its earlier lease; the operator's drain must survive. Found by a review
// (2026-12-05).
func TestLeaseLossKeepsOperatorDrain(t *testing.T) {
	c, cli, co := setup(t)
	px := etcdtest.NewProxy(t, c.Endpoint(0))
	aco := testkit.Coordinator(t, testkit.Client(t, px.URL()))
	a, _ := startAgent(t, aco, "test", agentConfig(config.Instance{Pool: "p", ID: "i1"}))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	old := a.Status().Lease
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := co.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil { // poolctl drain p i1
		t.Fatal(err)
	}
	px.Blackhole()
	stopKA, kaDone := make(chan struct{}), make(chan struct{})
	go func() { // the old lease stays alive on the server
		defer close(kaDone)
		for {
			_, _ = cli.KeepAliveOnce(ctx, old)
			select {
			case <-stopKA:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	testkit.Eventually(t, 10*time.Second, "the agent's session to end", func() bool { return !a.Status().LeaseAlive })
	px.Restore()
	testkit.Eventually(t, 10*time.Second, "registered under a new lease", func() bool {
		st := a.Status()
		return st.Registered && st.LeaseAlive && st.Lease != old
	})
	close(stopKA)
	<-kaDone
	if in := instanceMap(t, co)["i1"]; in.State != coordinator.InstanceDraining || in.Lease == old {
		t.Errorf("after the agent's lease loss i1 is %q under lease %x (old %x), want draining under the new one: the operator's drain was undone", in.State, in.Lease, old)
	}
}

// TestRolloutResumesAfterNewAgentLosesLease: in a rollout, B took i1 over
// from A (both have takeover on, as one manifest gives both pods). B's
// lease is then lost (a partition, a pause): i1 goes with it, and A, which
// still runs, registers it again as it must. B, back with a new lease,
// must take it over again: i1 was not taken from B, it was registered
// anew after B's key was gone. Before 2026-12-05 B left it to A for as
// long as A lived, as it leaves an instance another agent took over from
// it; B's /readyz then failed, and a rollout that waits for the new pod to
// be ready before it stops the old one stalled.
func TestRolloutResumesAfterNewAgentLosesLease(t *testing.T) {
	_, cli, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2})
	a, _ := startAgent(t, co, "a", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "A registered", func() bool { return a.Status().Registered })
	slow := cfg
	slow.TTL = config.Duration(10 * time.Second) // B learns of its lease's end seconds after A re-registers i1
	b, _ := startAgent(t, co, "b", slow, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B registered", func() bool { return b.Status().Registered })
	testkit.Eventually(t, 5*time.Second, "A to see i1 taken over", func() bool { return len(a.Status().Foreign) == 1 })

	lost := b.Status().Lease
	etcdtest.Revoke(t, cli, lost)
	testkit.Eventually(t, 5*time.Second, "A to register i1 again", func() bool {
		return instanceMap(t, co)["i1"].Lease == a.Status().Lease
	})
	testkit.Eventually(t, 20*time.Second, "B to take i1 over again", func() bool {
		in := instanceMap(t, co)["i1"]
		return in.Lease != lost && in.Lease == b.Status().Lease && b.Status().Registered
	})
	rev := instanceMap(t, co)["i1"].Revision
	testkit.Consistently(t, time.Second, "i1 left to B", func() bool {
		return instanceMap(t, co)["i1"].Revision == rev
	})
}

// TestOlderVersionTakeoverKept: a rollback to an etcdpool from before
// 2026-12-05. Its pod starts last and, takeover on, takes i1 over from B,
// writing no epoch. B must leave it, as it did before epochs (it had held
// i1): that pod never takes back an instance taken from it, so it would
// never turn ready, and the rollback would stall. Found by a review
// (2026-12-05): B took it back within an owner check, epoch 0 reading as
// the oldest.
func TestOlderVersionTakeoverKept(t *testing.T) {
	_, cli, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2})
	b, _ := startAgent(t, co, "b", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B registered", func() bool { return b.Status().Registered })
	old := testkit.Session(t, cli, 30*time.Second)
	ctx := testkit.Ctx(t, 30*time.Second)
	reg := coordinator.Instance{ID: "i1", Addr: "h:1", Seats: 2, Agent: "old-version"}
	_, err := co.RegisterInstance(ctx, "p", old.Lease(), reg)
	var owned *coordinator.InstanceOwnedError
	if !errors.As(err, &owned) {
		t.Fatalf("register: %v", err)
	}
	if _, err := co.TakeOverInstance(ctx, "p", owned, old.Lease(), reg); err != nil {
		t.Fatal(err)
	}
	testkit.Consistently(t, 2*time.Second, "i1 left to the old-version agent started after B", func() bool {
		return instanceMap(t, co)["i1"].Lease == old.Lease()
	})
}

// TestEpochTieOrderedByStart: A starts before its pool exists, so its
// registrations write nothing; B starts later and, no write having come
// between, reads the epoch A read. Once the pool is created A registers
// first. B, the newer agent with takeover on, must take i1 over: of one
// epoch, the agent that started first (by its clock) is the older. Found
// by a review (2026-12-05): the two tied, and B left i1 to A.
func TestEpochTieOrderedByStart(t *testing.T) {
	c, _, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.Pools = nil // created below
	a, _ := startAgent(t, co, "a", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "A to read an epoch", func() bool { return agentEpoch(a) > 0 })
	px := etcdtest.NewProxy(t, c.Endpoint(0))
	slow := cfg
	slow.TTL = config.Duration(15 * time.Second) // its session outlives the blackhole
	b, _ := startAgent(t, testkit.Coordinator(t, testkit.Client(t, px.URL())), "b", slow, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B to read an epoch", func() bool { return agentEpoch(b) > 0 })
	px.Blackhole()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	testkit.Eventually(t, 10*time.Second, "A registered", func() bool { return a.Status().Registered })
	px.Restore()
	testkit.Eventually(t, 15*time.Second, "B, started later with takeover on, to take i1 over", func() bool {
		return instanceMap(t, co)["i1"].Lease == b.Status().Lease && b.Status().Registered
	})
	if ea, eb := agentEpoch(a), agentEpoch(b); ea > eb {
		t.Errorf("epochs: A %d, B %d; want A's at most B's", ea, eb)
	}
}

// TestOldPoolctlDrainNoFlip: an operator with an etcdpool from before
// 2026-12-05 drains i1, held by B, the newer agent: the read-modify-write
// of that poolctl drops the epoch. A, the older agent, which B took i1
// from, must not take it over: an instance without an epoch is judged by
// the rule before epochs, and A had held it. Found by a review
// (2026-12-05): A took it over (0 below its epoch), then B took it back.
func TestOldPoolctlDrainNoFlip(t *testing.T) {
	_, cli, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1", Seats: 2})
	a, _ := startAgent(t, co, "a", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "A registered", func() bool { return a.Status().Registered })
	b, _ := startAgent(t, co, "b", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B registered", func() bool { return b.Status().Registered })
	testkit.Eventually(t, 5*time.Second, "A to see i1 taken over", func() bool { return len(a.Status().Foreign) == 1 })
	ctx := testkit.Ctx(t, 10*time.Second)
	key := coordinator.SegPrefix(co.Prefix(), "p", coordinator.SegInstances) + "i1"
	if _, err := cli.Put(ctx, key, `{"id":"i1","addr":"h:1","seats":2,"state":"draining","agent":"b"}`, clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	testkit.Consistently(t, 2*time.Second, "i1 left to B", func() bool {
		return instanceMap(t, co)["i1"].Lease == b.Status().Lease
	})
}

// TestOldRunKeepsEpoch: two runs of agent "x". The old one, X1, started
// while another agent held i1 and with an i2 whose address another
// instance has: none of its registrations writes. X2 starts later, writes
// i2, and takes i1 once its holder is gone, while X1 is cut off from etcd.
// Back, X1 must leave i1 to X2: it found its pool before X2 did, and keeps
// that epoch. Found by a review (2026-12-05): an epoch read again until a
// registration wrote outranked X2's, and X1 took i1 "from an earlier run
// of this agent", which was the later one.
func TestOldRunKeepsEpoch(t *testing.T) {
	c, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 4})
	ctx := testkit.Ctx(t, 60*time.Second)
	y, z := testkit.Session(t, cli, 30*time.Second), testkit.Session(t, cli, 30*time.Second)
	for _, r := range []struct {
		lease clientv3.LeaseID
		in    coordinator.Instance
	}{{y.Lease(), coordinator.Instance{ID: "i1", Addr: "h:1", Agent: "y", Epoch: 1}}, {z.Lease(), coordinator.Instance{ID: "z9", Addr: "h:9", Agent: "z", Epoch: 1}}} {
		if _, err := co.RegisterInstance(ctx, "p", r.lease, r.in); err != nil {
			t.Fatal(err)
		}
	}
	px := etcdtest.NewProxy(t, c.Endpoint(0))
	cfg1 := agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1"}, config.Instance{Pool: "p", ID: "i2", Address: "h:9"})
	cfg1.Pools, cfg1.TTL = nil, config.Duration(15*time.Second)
	x1, _ := startAgent(t, testkit.Coordinator(t, testkit.Client(t, px.URL())), "x", cfg1)
	testkit.Eventually(t, 5*time.Second, "X1 to see i1 held by y", func() bool { return len(x1.Status().Foreign) == 1 })
	if _, err := cli.Put(ctx, "/unrelated", "a write elsewhere in etcd"); err != nil {
		t.Fatal(err)
	}
	cfg2 := agentConfig(config.Instance{Pool: "p", ID: "i1", Address: "h:1"}, config.Instance{Pool: "p", ID: "i2", Address: "h:2"})
	cfg2.Pools = nil
	x2, _ := startAgent(t, co, "x", cfg2)
	testkit.Eventually(t, 5*time.Second, "X2 to register i2", func() bool {
		l := x2.Status().Lease
		return l != 0 && instanceMap(t, co)["i2"].Lease == l
	})
	px.Blackhole()
	etcdtest.Revoke(t, cli, y.Lease())
	testkit.Eventually(t, 5*time.Second, "X2 to register i1", func() bool { return x2.Status().Registered })
	px.Restore()
	testkit.Consistently(t, 3*time.Second, "i1 left to X2, the later run", func() bool {
		return instanceMap(t, co)["i1"].Lease == x2.Status().Lease
	})
}

// TestWaitingAgentStaysOlder: A starts first and waits for its pool; B
// starts later. The pool is created while A is cut off from etcd, and B
// registers i1. Back, A must leave i1 to B: its epoch is the one it read
// at its start, not one read after the pool appeared. Found by a review
// (2026-12-05): an epoch read again while the pool was missing made A,
// whose retries had backed off longer, the newer, and it took i1 from B.
func TestWaitingAgentStaysOlder(t *testing.T) {
	c, _, co := setup(t)
	cfg := agentConfig(config.Instance{Pool: "p", ID: "i1"})
	cfg.Pools = nil // created below, by an operator
	cfg.TTL = config.Duration(15 * time.Second)
	px := etcdtest.NewProxy(t, c.Endpoint(0))
	a, _ := startAgent(t, testkit.Coordinator(t, testkit.Client(t, px.URL())), "a", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "A to read an epoch", func() bool { return agentEpoch(a) > 0 })
	b, _ := startAgent(t, co, "b", cfg, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B to read an epoch", func() bool { return agentEpoch(b) > 0 })
	px.Blackhole()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	testkit.Eventually(t, 10*time.Second, "B registered", func() bool { return b.Status().Registered })
	px.Restore()
	testkit.Consistently(t, 4*time.Second, "i1 left to B, the agent started later", func() bool {
		return instanceMap(t, co)["i1"].Lease == b.Status().Lease
	})
}

// TestMultiPoolEpochByStart: B (instances in q only) starts while q does
// not exist; A starts later with instances in p and q. Once q is created,
// B, the older, must leave q/j1 to A. Found by a review (2026-12-05): an
// epoch taken when the agent first found one of its pools made B, which
// found q last, the newer.
func TestMultiPoolEpochByStart(t *testing.T) {
	_, _, co := setup(t)
	cfgB := agentConfig(config.Instance{Pool: "q", ID: "j1"})
	cfgB.Pools = nil
	b, _ := startAgent(t, co, "b", cfgB, WithTakeover(true))
	testkit.Eventually(t, 10*time.Second, "B to read an epoch", func() bool { return agentEpoch(b) > 0 })
	cfgA := agentConfig(config.Instance{Pool: "p", ID: "i1"}, config.Instance{Pool: "q", ID: "j1"})
	a, _ := startAgent(t, co, "a", cfgA, WithTakeover(true))
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.Eventually(t, 10*time.Second, "A to register p/i1", func() bool {
		i1, err := co.GetInstance(ctx, "p", "i1")
		return err == nil && i1.Lease == a.Status().Lease
	})
	testkit.CreatePool(t, co, "q", coordinator.PoolSpec{Capacity: 2})
	held := func() bool {
		j1, err := co.GetInstance(ctx, "q", "j1")
		return err == nil && j1.Lease == a.Status().Lease
	}
	testkit.Eventually(t, 10*time.Second, "A, started later, to hold q/j1", held)
	testkit.Consistently(t, 3*time.Second, "q/j1 left to A", held)
}

// TestLostTakeoverAnswerKeepsDrain: an operator drained i1 under an
// earlier lease of agent "test"; the restarted agent takes it over,
// keeping the drain, but the takeover's answer is lost (it applied). The
// agent's retry must find the key its own and leave it: written again it
// read ready. Found by a review (2026-12-05).
func TestLostTakeoverAnswerKeepsDrain(t *testing.T) {
	c, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	earlier := testkit.Session(t, cli, 10*time.Second)
	ctx := testkit.Ctx(t, 30*time.Second)
	if _, err := co.RegisterInstance(ctx, "p", earlier.Lease(), coordinator.Instance{ID: "i1", Agent: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := co.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	var lost atomic.Bool
	loseAnswer := func(ictx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ictx, method, req, reply, cc, opts...)
		if err == nil && isTakeover(req) && lost.CompareAndSwap(false, true) {
			<-ictx.Done() // applied; its answer lost until the request timeout
			return status.FromContextError(ictx.Err()).Err()
		}
		return err
	}
	lossy := testkit.Coordinator(t, testkit.DialedClient(t, c.Endpoints(), grpc.WithChainUnaryInterceptor(loseAnswer)), coordinator.WithPrefix(co.Prefix()))
	a, _ := startAgent(t, lossy, "test", agentConfig(config.Instance{Pool: "p", ID: "i1"}))
	testkit.Eventually(t, 10*time.Second, "registered", func() bool { return a.Status().Registered })
	if !lost.Load() {
		t.Fatal("no takeover's answer was lost")
	}
	if in := instanceMap(t, co)["i1"]; in.State != coordinator.InstanceDraining {
		t.Errorf("i1 %q under the agent's lease (%v): the retry after a lost takeover answer undid the operator's drain", in.State, in.Lease == a.Status().Lease)
	}
}

// agentEpoch is x's epoch; 0 until read.
func agentEpoch(x *Agent) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.epoch
}
