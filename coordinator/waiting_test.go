package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// waiterMetrics records the Waiting gauge per pool and reason.
type waiterMetrics struct {
	coordinator.NoopMetrics
	mu sync.Mutex
	g  map[string]int
}

func (m *waiterMetrics) Waiting(pool, reason string, d int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.g == nil {
		m.g = map[string]int{}
	}
	m.g[pool+"/"+reason] += d
}

func (m *waiterMetrics) get(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.g[key]
}

// statusLog keeps the WaitStatus reports of one claim.
type statusLog struct {
	mu  sync.Mutex
	got []coordinator.WaitStatus
}

func (l *statusLog) add(s coordinator.WaitStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, s)
}

func (l *statusLog) last() (coordinator.WaitStatus, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) == 0 {
		return coordinator.WaitStatus{}, false
	}
	return l.got[len(l.got)-1], true
}

// waitingKeys counts the held-back waiters' records under pool.
func waitingKeys(t testing.TB, cli *clientv3.Client, c *coordinator.Coordinator, pool string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), coordinator.SegPrefix(c.Prefix(), pool, coordinator.SegWaiting), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestHeldBackWaitersAreVisible is issue 11's scenario: a pool of 3 with a
// tenant limit of 1 and five jobs (tenants a, a, b, b, none). The two jobs
// held back by their tenant's limit appear in Queue, PoolStatus, ListPools,
// the event stream and the metrics, with why they wait; their records go
// when they are granted or give up, and a watcher sees one join and one
// leave each.
func TestHeldBackWaitersAreVisible(t *testing.T) {
	m := &waiterMetrics{}
	c, cli := newCoord(t, coordinator.WithMetrics(m))
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "asr", coordinator.PoolSpec{Capacity: 3, TenantLimit: 1})
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events := c.Watch(wctx, "asr")
	s := testkit.Session(t, cli, 10*time.Second)
	held := map[string]*coordinator.Claim{}
	for _, j := range []struct{ holder, tenant string }{{"a1", "a"}, {"b1", "b"}, {"n1", ""}} {
		held[j.holder] = mustClaim(t, ctx, c, s, "asr", coordinator.WithHolder(j.holder), coordinator.WithTenant(j.tenant))
	}
	logs := map[string]*statusLog{"a2": {}, "b2": {}}
	results := map[string]chan error{"a2": make(chan error, 1), "b2": make(chan error, 1)}
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	for holder, wctx := range map[string]context.Context{"a2": ctx, "b2": bctx} {
		go func() {
			cl, err := c.Claim(wctx, s, "asr", coordinator.WithWait(), coordinator.WithHolder(holder),
				coordinator.WithTenant(holder[:1]), coordinator.WithWaitStatus(logs[holder].add))
			if err == nil {
				defer func() { _ = cl.Release(ctx) }()
			}
			results[holder] <- err
		}()
	}
	waitQueued(t, c, "asr", 2)
	q, err := c.Queue(ctx, "asr")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range q {
		want := fmt.Sprintf("tenant %q holds 1 of its limit 1", w.Tenant)
		if w.Position != -1 || w.Reason != coordinator.WaitTenantLimit || !strings.Contains(w.Detail, want) || w.Status().InLine {
			t.Errorf("waiter %+v: want held back (position -1) for tenant_limit, detail %q", w, want)
		}
	}
	ps, err := c.PoolStatus(ctx, "asr")
	if err != nil || ps.Waiting != 2 {
		t.Fatalf("PoolStatus: waiting %d, %v; want 2", ps.Waiting, err)
	}
	if pools, err := c.ListPools(ctx); err != nil || len(pools) != 1 || pools[0].Waiting != 2 {
		t.Fatalf("ListPools: %+v, %v; want waiting 2", pools, err)
	}
	testkit.Eventually(t, 5*time.Second, "gauge tenant_limit 2", func() bool { return m.get("asr/tenant_limit") == 2 })
	for holder, l := range logs {
		if st, ok := l.last(); !ok || st.Reason != coordinator.WaitTenantLimit || st.InLine {
			t.Errorf("%s reported %+v, want held back for tenant_limit", holder, st)
		}
	}
	joined := map[string]string{}
	for len(joined) < 2 {
		ev := nextEvent(t, events)
		if ev.Type == coordinator.EventWaiterJoined {
			joined[ev.Holder] = ev.Reason
		}
	}
	if joined["a2"] != "tenant_limit" || joined["b2"] != "tenant_limit" {
		t.Fatalf("waiter-joined reasons %v, want tenant_limit for a2 and b2", joined)
	}

	// a1 leaves: a2 moves into line and is granted; b2 gives up.
	if err := held["a1"].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-results["a2"]; err != nil {
		t.Fatalf("a2: %v", err)
	}
	cancelB()
	if err := <-results["b2"]; !errors.Is(err, context.Canceled) {
		t.Fatalf("b2: %v, want context.Canceled", err)
	}
	waitQueued(t, c, "asr", 0)
	if n := waitingKeys(t, cli, c, "asr"); n != 0 {
		t.Fatalf("%d waiting records left", n)
	}
	if g := m.get("asr/tenant_limit"); g != 0 {
		t.Fatalf("gauge tenant_limit %d after both left, want 0", g)
	}
	// Each waiter joined once and left once: moving into line is no event.
	left := map[string]int{}
	for left["a2"] < 1 || left["b2"] < 1 {
		ev := nextEvent(t, events)
		switch ev.Type {
		case coordinator.EventWaiterJoined:
			t.Fatalf("%s joined again (%+v): a move into line must not show", ev.Holder, ev)
		case coordinator.EventWaiterLeft:
			left[ev.Holder]++
		}
	}
}

func nextEvent(t *testing.T, events <-chan coordinator.Event) coordinator.Event {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("event stream closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return coordinator.Event{}
}

// TestQueuedWaitersSayWhy: the head says what keeps it from a seat, a
// waiter behind it how many stand ahead; each reports the same through
// its WaitStatus hook.
func TestQueuedWaitersSayWhy(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	s := testkit.Session(t, cli, 10*time.Second)
	holder := mustClaim(t, ctx, c, s, "p")
	logs := []*statusLog{{}, {}}
	var wg sync.WaitGroup
	for i, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.Claim(ctx, s, "p", coordinator.WithWait(), coordinator.WithWaitStatus(l.add))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			_ = cl.Release(ctx)
		}()
		waitQueued(t, c, "p", i+1)
	}
	q, err := c.Queue(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if q[0].Reason != coordinator.WaitPoolFull || q[0].Ahead != 0 || q[1].Reason != coordinator.WaitQueue || q[1].Ahead != 1 {
		t.Fatalf("queue %+v: want the head pool_full, the next behind 1", q)
	}
	testkit.Eventually(t, 5*time.Second, "both waiters report", func() bool {
		h, ok1 := logs[0].last()
		b, ok2 := logs[1].last()
		return ok1 && ok2 && h.Reason == coordinator.WaitPoolFull && h.InLine && b.Reason == coordinator.WaitQueue && b.Ahead == 1
	})
	if st, _ := logs[1].last(); st.String() != "behind 1 other in line" {
		t.Fatalf("String() = %q", st.String())
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// TestDeniedTenantFailsAtOnce: a tenant whose limit is 0 can never be
// granted, so its claim fails at once with tenant_denied, waiting or not,
// whatever else is in the way; and a held-back waiter whose tenant becomes
// denied stops waiting.
func TestDeniedTenantFailsAtOnce(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1, TenantLimits: map[string]int{"x": 0, "y": 1}})
	s := testkit.Session(t, cli, 10*time.Second)
	for _, wait := range []bool{false, true} {
		opts := []coordinator.ClaimOption{coordinator.WithTenant("x")}
		if wait {
			opts = append(opts, coordinator.WithWait())
		}
		start := time.Now()
		_, err := c.Claim(ctx, s, "p", opts...)
		var ns *coordinator.NoSeatError
		if !errors.As(err, &ns) || ns.Reason != coordinator.WaitTenantDenied || !ns.Never() || time.Since(start) > 5*time.Second {
			t.Fatalf("wait=%v: %v after %v, want tenant_denied at once", wait, err, time.Since(start))
		}
	}
	y := mustClaim(t, ctx, c, s, "p", coordinator.WithTenant("y"))
	defer func() { _ = y.Release(ctx) }()
	res := waitingClaim(ctx, c, s, "p", coordinator.WithTenant("y"))
	waitQueued(t, c, "p", 1)
	p, err := c.GetPool(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.TenantLimits["y"] = 0
	if _, err := c.UpdatePool(ctx, "p", p.Spec, p.Revision); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		var ns *coordinator.NoSeatError
		if !errors.As(err, &ns) || ns.Reason != coordinator.WaitTenantDenied {
			t.Fatalf("held-back waiter: %v, want tenant_denied", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter whose tenant became denied still waits")
	}
	waitQueued(t, c, "p", 0)
}

// TestHeadBarredStepsOutVisibly: a head that its own selector bars once
// a seat frees steps out of line into a waiting record in one txn (no
// waiter-left/joined pair), shows why, and is granted when it fits again.
// It rejoins the line under a fresh name: a grant or hand-off planned for
// its first queue key must not match the second (queue.go, names.go).
func TestHeadBarredStepsOutVisibly(t *testing.T) {
	c, cli, ctx, s, h := zonedPoolHeld(t)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events := c.Watch(wctx, "p")
	queued := cli.Watch(wctx, c.Prefix()+"/pools/p/queue/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	<-queued // registered
	res := zoneAWaiter(ctx, c, s)
	barHead(t, ctx, c, h)
	testkit.Eventually(t, 10*time.Second, "w held back, no matching instance", func() bool {
		q, err := c.Queue(ctx, "p")
		return err == nil && len(q) == 1 && q[0].Position == -1 && q[0].Reason == coordinator.WaitNoMatchingInstance
	})
	if _, err := c.SetInstanceState(ctx, "p", "i1", coordinator.InstanceReady); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	var seen []string
	for {
		ev := nextEvent(t, events)
		if ev.Holder == "w" && (ev.Type == coordinator.EventWaiterJoined || ev.Type == coordinator.EventWaiterLeft) {
			seen = append(seen, string(ev.Type))
		}
		if ev.Type == coordinator.EventSeatReleased && ev.Holder == "w" {
			break
		}
	}
	if strings.Join(seen, ",") != "waiter-joined,waiter-left" {
		t.Fatalf("events of w: %v, want one join and one leave", seen)
	}
	var names []string // of w's queue keys, in the order they were put
	for len(names) < 2 {
		select {
		case wr := <-queued:
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					names = append(names, keyName(string(ev.Kv.Key)))
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("w's queue keys: %v; want two, before and after it stepped out", names)
		}
	}
	if names[0] == names[1] {
		t.Errorf("w rejoined the line under its first name %s; want a fresh one", names[0])
	}
}

// zonedPoolHeld creates pool "p" of one seat with instances i1 (zone a)
// and i2 (zone b), and fills the seat on i2 with session s.
func zonedPoolHeld(t *testing.T) (*coordinator.Coordinator, *clientv3.Client, context.Context, *coordinator.Session, *coordinator.Claim) {
	t.Helper()
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	agent := testkit.Session(t, cli, 10*time.Second)
	for id, zone := range map[string]string{"i1": "a", "i2": "b"} {
		if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: id, Labels: map[string]string{"zone": zone}}); err != nil {
			t.Fatal(err)
		}
	}
	s := testkit.Session(t, cli, 10*time.Second)
	return c, cli, ctx, s, mustClaim(t, ctx, c, s, "p", coordinator.WithLabels(map[string]string{"zone": "b"}))
}

// zoneAWaiter starts claimant "w" of zone a on pool "p" of zonedPoolHeld,
// waiting; it releases the seat it is granted, and sends the claim's error.
func zoneAWaiter(ctx context.Context, c *coordinator.Coordinator, s *coordinator.Session) <-chan error {
	res := make(chan error, 1)
	go func() {
		cl, err := c.Claim(ctx, s, "p", coordinator.WithWait(), coordinator.WithHolder("w"), coordinator.WithLabels(map[string]string{"zone": "a"}))
		if err == nil {
			_ = cl.Release(ctx)
		}
		res <- err
	}()
	return res
}

// barHead waits until a waiter of zone a is the head of pool "p" of
// zonedPoolHeld, its seat being full, then drains i1 and releases h: the
// head, barred by its own selector, steps out.
func barHead(t *testing.T, ctx context.Context, c *coordinator.Coordinator, h *coordinator.Claim) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "w in line, pool full", func() bool {
		q, err := c.Queue(ctx, "p")
		return err == nil && len(q) == 1 && q[0].Position == 0 && q[0].Reason == coordinator.WaitPoolFull
	})
	if _, err := c.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSteppedOutRecordKeepsFirst: a waiter that steps out of line,
// barred at the head, writes a waiting record that keeps the create
// revision of its first (waitingRecord.First): its place among the
// held-back waiters of other processes (heldback_peers.go). Its first
// record is the one it wrote when held back, or, if it went into line
// at once, the one it wrote when it first stepped out; every later one
// keeps it. Before, the record said nothing of it, and other processes
// took its create revision, later than theirs.
func TestSteppedOutRecordKeepsFirst(t *testing.T) {
	for _, heldFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("held-back-first=%v", heldFirst), func(t *testing.T) {
			c, cli, ctx, s, h := zonedPoolHeld(t)
			setI1 := func(st coordinator.InstanceState) {
				t.Helper()
				if _, err := c.SetInstanceState(ctx, "p", "i1", st); err != nil {
					t.Fatal(err)
				}
			}
			if heldFirst {
				in, err := c.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining)
				if err != nil {
					t.Fatal(err)
				}
				// The claim h keeps c's pool feed: w must look at a view that
				// shows the drain, or it joins the line, unrecorded, behind a
				// full pool (seen once in CI on 2026-12-05).
				testkit.Eventually(t, 10*time.Second, "c's pool feed to show i1 draining", func() bool {
					return coordinator.FeedAt(c, "p", in.Revision)
				})
			}
			wctx, stopWatch := context.WithCancel(ctx)
			defer stopWatch()
			records := cli.Watch(wctx, c.Prefix()+"/pools/p/waiting/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
			<-records // registered
			put := func(what string) (*mvccpb.KeyValue, int64) {
				t.Helper()
				for {
					select {
					case wr := <-records:
						for _, ev := range wr.Events {
							if ev.Type == clientv3.EventTypePut {
								var rec struct {
									First int64 `json:"first"`
								}
								if err := json.Unmarshal(ev.Kv.Value, &rec); err != nil {
									t.Fatal(err)
								}
								return ev.Kv, rec.First
							}
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("no waiting record written %s", what)
					}
				}
			}
			res := zoneAWaiter(ctx, c, s)
			var first *mvccpb.KeyValue
			if heldFirst {
				first, _ = put("when w was held back")
				setI1(coordinator.InstanceReady)
			}
			for round := range 2 {
				barHead(t, ctx, c, h)
				rec, recFirst := put(fmt.Sprintf("when w stepped out (round %d)", round))
				if first == nil {
					first = rec
				} else if recFirst != first.CreateRevision {
					t.Fatalf("round %d: the record w wrote when it stepped out (created at %d) says first %d; want %d, its first record's",
						round, rec.CreateRevision, recFirst, first.CreateRevision)
				}
				h = mustClaim(t, ctx, c, s, "p", coordinator.WithLabels(map[string]string{"zone": "b"})) // fills the seat again
				setI1(coordinator.InstanceReady)                                                         // w joins the line again
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-res; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLostRecordWriteRetiresName: when the put of a held-back waiter's
// record fails with its outcome unknown (here it lands and its answer is
// lost), the record may outlive the claim, so the claim's name must not
// be reused by the session (names.go): a later claim could otherwise find
// the old record under its own name. Released cleanly afterwards, the
// claim's name is still not given back.
func TestLostRecordWriteRetiresName(t *testing.T) {
	var lost atomic.Int64
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.PutRequest); ok && err == nil && strings.Contains(string(r.Key), "/waiting/") && lost.Add(1) == 1 {
			return status.Error(codes.Unavailable, "injected: the put landed, its answer was lost")
		}
		return err
	}
	cli := newObservedClient(t, shared.Endpoint(), ic)
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix(fmt.Sprintf("/lostrecord/%d", time.Now().UnixNano())))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2, TenantLimit: 1})
	other := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithTenant("acme"))
	s := testkit.Session(t, cli, 30*time.Second)
	granted := make(chan *coordinator.Claim, 1)
	go func() {
		cl, err := c.Claim(ctx, s, "p", coordinator.WithWait(), coordinator.WithTenant("acme")) // held back: acme is at its limit
		if err != nil {
			t.Error(err)
		}
		granted <- cl
	}()
	testkit.Eventually(t, 10*time.Second, "the held-back waiter's record put", func() bool { return lost.Load() > 0 })
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-granted
	if first == nil {
		t.FailNow()
	}
	firstName := seatName(t, ctx, cli, c, s)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := mustClaim(t, ctx, c, s, "p", coordinator.WithTenant("acme"))
	defer func() { _ = next.Release(ctx) }()
	if name := seatName(t, ctx, cli, c, s); name == firstName {
		t.Errorf("the session reused the name %s, whose waiting record's put was lost; want a fresh one", name)
	}
}

// seatName returns the name (last key segment) of the seat s holds in
// pool "p" of c.
func seatName(t *testing.T, ctx context.Context, cli *clientv3.Client, c *coordinator.Coordinator, s *coordinator.Session) string {
	t.Helper()
	resp, err := cli.Get(ctx, c.Prefix()+"/pools/p/seats/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if clientv3.LeaseID(kv.Lease) == s.Lease() {
			return keyName(string(kv.Key))
		}
	}
	t.Fatalf("no seat of lease %x", s.Lease())
	return ""
}

// TestGrantedAsHeadStepsOutKeepsSeat: the head, barred by its tenant's
// limit, decides to step out of line; before its step-out txn lands, the
// tenant's holder releases and hands the seat to it. The step-out's
// compare on its queue key fails. The waiter must take the seat it was
// given, not leave the line as a waiter that gives up (which released the
// seat to the next waiter) and rejoin it at the back. Found by a review
// (2026-12-04): the head still waited 5 s later, behind two later arrivals
// that held seats.
func TestGrantedAsHeadStepsOutKeepsSeat(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2, TenantLimit: 1})
	grantedAsHeadKeepsSeat(t, ctx, c, cli, c, cli)
}

// A head barred by its tenant's limit whose bar lifts while its step-out is
// on the way stays first in line: the step-out proves the bar (the
// tenant's held slots, the spec), fails, and the head looks again and takes
// a seat. Found by a review (2026-12-05): the step-out compared the head's
// queue key only, so it applied, and the two waiters behind it took both
// free seats while it went to the back.
func TestStepOutAfterBarLiftedStaysFirst(t *testing.T) {
	t.Run("tenant", func(t *testing.T) {
		c, cli := newCoord(t)
		ctx := testkit.Ctx(t, 60*time.Second)
		testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2, TenantLimits: map[string]int{"a": 2}})
		aSess, ySess := testkit.Session(t, cli, 30*time.Second), testkit.Session(t, cli, 30*time.Second)
		mustClaim(t, ctx, c, aSess, "p", coordinator.WithTenant("a"))
		mustClaim(t, ctx, c, ySess, "p")
		stepOutAfterBarLifted(t, ctx, c, coordinator.WaitTenantLimit, []coordinator.ClaimOption{coordinator.WithTenant("a")},
			func() { // tenant a's limit drops to 1: H is barred by it, but the pool is full
				if _, err := c.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 2, TenantLimits: map[string]int{"a": 1}}, 0); err != nil {
					t.Fatal(err)
				}
			},
			ySess.Lease(), aSess.Lease()) // a seat frees; then tenant a has room again
	})
	t.Run("instance", func(t *testing.T) {
		c, cli := newCoord(t)
		ctx := testkit.Ctx(t, 60*time.Second)
		testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 3})
		agent := testkit.Session(t, cli, 30*time.Second)
		register := func(id string, seats int) {
			if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: id, Seats: seats}); err != nil {
				t.Fatal(err)
			}
		}
		register("i1", 2)
		register("i2", 2)
		xSess, ySess := testkit.Session(t, cli, 30*time.Second), testkit.Session(t, cli, 30*time.Second)
		mustClaim(t, ctx, c, xSess, "p", coordinator.WithInstance("i2"))
		mustClaim(t, ctx, c, ySess, "p", coordinator.WithInstance("i1"))
		mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithInstance("i1"))
		stepOutAfterBarLifted(t, ctx, c, coordinator.WaitNoMatchingInstance, []coordinator.ClaimOption{coordinator.WithInstance("i2")},
			func() { register("i2", 1) }, // i2 is full: H is barred by it, but the pool is full
			ySess.Lease(), xSess.Lease()) // a seat of i1 frees; then i2's
	})
}

// stepOutAfterBarLifted runs TestStepOutAfterBarLiftedStaysFirst on pool
// "p" of c, full: a waiter H with opts, first in line, then W2 and W3;
// bar makes H barred by its own constraints (reason), which the full pool
// hides; free's lease ends, and H, barred, steps out; before its step-out
// is sent, lift's lease ends, which lifts the bar, and a key outside the
// pool is written, so the step-out's failed txn answers at a revision
// past the pool's last change (a review found H then waited for a change
// of the pool that never came, 2026-12-05). H must be granted one of the
// two seats.
func stepOutAfterBarLifted(t *testing.T, ctx context.Context, c *coordinator.Coordinator, reason coordinator.WaitReason,
	opts []coordinator.ClaimOption, bar func(), free, lift clientv3.LeaseID) {
	cli := c.Client()
	type result struct {
		name string
		err  error
	}
	got := make(chan result, 3)
	waiter := func(name string, opts ...coordinator.ClaimOption) {
		s := testkit.Session(t, cli, 30*time.Second)
		go func() {
			_, err := c.Claim(ctx, s, "p", append(opts, coordinator.WithWait())...)
			got <- result{name, err}
		}()
	}
	barred, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	waiter("H", append(opts, coordinator.WithWaitStatus(func(ws coordinator.WaitStatus) {
		if ws.Reason == reason {
			once.Do(func() { close(barred); <-unblock }) // set just before the step-out
		}
	}))...)
	waitQueued(t, c, "p", 1)
	waiter("W2")
	waitQueued(t, c, "p", 2)
	waiter("W3")
	waitQueued(t, c, "p", 3)
	bar()
	if _, err := cli.Revoke(ctx, free); err != nil { // a seat frees: H steps out
		t.Fatal(err)
	}
	select {
	case <-barred:
	case <-ctx.Done():
		t.Fatal("H was never barred at the head")
	}
	if _, err := cli.Revoke(ctx, lift); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, c.Prefix()+"-elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	close(unblock)
	var granted []string
	for range 2 {
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("%s: %v", r.name, r.err)
			}
			granted = append(granted, r.name)
		case <-time.After(10 * time.Second):
			t.Fatalf("granted %v; no more within 10 s, two seats free", granted)
		}
	}
	if !slices.Contains(granted, "H") {
		t.Fatalf("granted %v the two free seats, while H, first in line, could take one: its step-out applied after its bar lifted", granted)
	}
}

// grantedAsHeadKeepsSeat runs TestGrantedAsHeadStepsOutKeepsSeat on pool
// "p" of c (capacity 2, tenant limit 1), with the head h a claimant of hc
// on client hcli and every other claimant of c on cli.
func grantedAsHeadKeepsSeat(t *testing.T, ctx context.Context, c *coordinator.Coordinator, cli *clientv3.Client, hc *coordinator.Coordinator, hcli *clientv3.Client) {
	t.Helper()
	type result struct {
		cl  *coordinator.Claim
		err error
	}
	waiter := func(c *coordinator.Coordinator, cli *clientv3.Client, opts ...coordinator.ClaimOption) <-chan result {
		out, s := make(chan result, 1), testkit.Session(t, cli, 30*time.Second)
		go func() {
			cl, err := c.Claim(ctx, s, "p", append([]coordinator.ClaimOption{coordinator.WithWait()}, opts...)...)
			out <- result{cl, err}
		}()
		return out
	}
	first := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	w0 := waiter(c, cli, coordinator.WithTenant("x"))
	waitQueued(t, c, "p", 1)
	barred, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := waiter(hc, hcli, coordinator.WithTenant("x"), coordinator.WithWaitStatus(func(ws coordinator.WaitStatus) {
		if ws.Reason == coordinator.WaitTenantLimit {
			once.Do(func() { close(barred); <-unblock }) // set just before the step out
		}
	}))
	waitQueued(t, c, "p", 2)
	later := []<-chan result{waiter(c, cli), waiter(c, cli)}
	waitQueued(t, c, "p", 4)
	if err := first.Release(ctx); err != nil { // hands off to w0: tenant x at its limit
		t.Fatal(err)
	}
	r0 := <-w0
	if r0.err != nil {
		t.Fatal(r0.err)
	}
	pl, err := c.GetPool(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	pl.Spec.Capacity = 3 // a seat frees: h, now head, sees it, barred by x's limit
	grown, err := c.UpdatePool(ctx, "p", pl.Spec, pl.Revision)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-barred:
	case <-ctx.Done():
		t.Fatal("h was never barred at the head")
	}
	// w0's release plans its hand-off to h on this view: it must show the
	// capacity h was barred at, or its spec compare fails and the seat
	// goes free, not to h.
	testkit.Eventually(t, 10*time.Second, "the releaser's feed to show the new capacity", func() bool {
		return coordinator.FeedAt(c, "p", grown.Revision)
	})
	if err := r0.cl.Release(ctx); err != nil { // its hand-off grants h
		t.Fatal(err)
	}
	// A write outside the pool: the failed step-out's answer is at a
	// revision past the pool's last change (see stepOutAfterBarLifted).
	if _, err := cli.Put(ctx, c.Prefix()+"-elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	close(unblock)
	select {
	case r := <-h:
		if r.err != nil {
			t.Fatalf("h: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		held := 0
		for _, ch := range later {
			select {
			case r := <-ch:
				if r.err == nil {
					held++
				}
			default:
			}
		}
		t.Fatalf("h, granted a seat by the hand-off, still waits 5 s later; %d later arrivals hold seats", held)
	}
}

// TestWaiterKeepsSinceInLine: a waiter held back by its tenant's limit
// that then moves into line keeps the time it began to wait, which Queue,
// poolctl queue and the oldest-waiter gauge show. Found by a review
// (2026-12-04): it restarted at the move.
func TestWaiterKeepsSinceInLine(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2, TenantLimit: 1})
	session := func() *coordinator.Session { return testkit.Session(t, cli, 30*time.Second) }
	a := mustClaim(t, ctx, c, session(), "p", coordinator.WithTenant("t"))
	mustClaim(t, ctx, c, session(), "p", coordinator.WithTenant("u"))
	waitingClaim(ctx, c, session(), "p", coordinator.WithHolder("D"), coordinator.WithTenant("v"))
	waitQueued(t, c, "p", 1)
	waitingClaim(ctx, c, session(), "p", coordinator.WithHolder("B"), coordinator.WithTenant("t"))
	b := func(inLine bool) (since time.Time) {
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("B in line: %v", inLine), func() bool {
			q, err := c.Queue(ctx, "p")
			for _, w := range q {
				if err == nil && w.Holder == "B" && (w.Position >= 0) == inLine {
					since = w.Since
					return true
				}
			}
			return false
		})
		return since
	}
	held := b(false)
	time.Sleep(300 * time.Millisecond)
	if err := a.Release(ctx); err != nil { // D takes the seat; B's tenant has room: it joins the line
		t.Fatal(err)
	}
	if since := b(true); !since.Equal(held) {
		t.Fatalf("B's since moved from %s to %s as it joined the line", held.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano))
	}
}
