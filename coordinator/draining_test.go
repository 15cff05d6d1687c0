package coordinator_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// A holder is told when the instance its seat is bound to starts
// draining, while it still holds the seat; an anonymous seat never is.
// Before 2026-12-05 a holder learned of a drain only at its timeout, as
// ErrInstanceGone.
func TestDrainingTellsHolder(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Seats: 2}); err != nil {
		t.Fatal(err)
	}
	s := testkit.Session(t, cli, 10*time.Second)
	bound := mustClaim(t, ctx, c, s, "p", coordinator.WithInstance("i1"))
	draining := bound.Draining()
	// A change that is not a drain (re-registered with labels) says nothing.
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Seats: 2, Labels: map[string]string{"z": "a"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-draining:
		t.Fatal("Draining closed for an instance that is ready")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := c.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	select {
	case <-draining:
	case <-time.After(5 * time.Second):
		t.Fatal("Draining did not close after the instance started draining")
	}
	select {
	case <-bound.Done():
		t.Fatalf("Done closed on a drain: %v", bound.Err())
	default:
	}
	if err := bound.Release(ctx); err != nil {
		t.Fatalf("release while draining: %v", err)
	}

	// Anonymous: a pool without instances.
	testkit.CreatePool(t, c, "anon", coordinator.PoolSpec{Capacity: 1})
	anon := mustClaim(t, ctx, c, s, "anon")
	select {
	case <-anon.Draining():
		t.Fatal("Draining closed for an anonymous seat")
	case <-time.After(200 * time.Millisecond):
	}
}

// A claim taken back with Adopt after its instance drained and was made
// ready again is not told Draining: the monitor replays the instance's
// history from the grant, and confirms a drain it replays by reading the
// instance now. Found by a review (2026-12-05): it said draining.
func TestDrainingNotStaleOnAdopt(t *testing.T) {
	ctx, c, s, cl := claimOnInstance(t)
	for _, st := range []coordinator.InstanceState{coordinator.InstanceDraining, coordinator.InstanceReady} {
		if _, err := c.SetInstanceState(ctx, "p", "i1", st); err != nil {
			t.Fatal(err)
		}
	}
	adopted, err := c.Adopt(ctx, s, "p", cl.Seat(), cl.Token())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-adopted.Draining():
		t.Fatal("Draining closed for a claim adopted while its instance is ready")
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := c.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	select {
	case <-adopted.Draining():
	case <-time.After(5 * time.Second):
		t.Fatal("Draining did not close when the instance drained again")
	}
}

// DrainState follows the bound instance both ways: a drain, then the
// instance made ready again (poolctl undrain), then drained again; each
// change closes the channel the last call returned. Draining closes at
// the first drain and stays closed. Before 2026-12-05 a holder was never
// told of an undrain.
func TestDrainStateFollowsUndrain(t *testing.T) {
	ctx, c, _, cl := claimOnInstance(t)
	on, changed := cl.DrainState()
	if on {
		t.Fatal("DrainState says draining for a ready instance")
	}
	for i, st := range []coordinator.InstanceState{coordinator.InstanceDraining, coordinator.InstanceReady, coordinator.InstanceDraining} {
		if _, err := c.SetInstanceState(ctx, "p", "i1", st); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("step %d (%s): DrainState's channel did not close", i, st)
		}
		on, changed = cl.DrainState()
		if want := st == coordinator.InstanceDraining; on != want {
			t.Fatalf("step %d (%s): DrainState says draining %v, want %v", i, st, on, want)
		}
		select {
		case <-cl.Draining():
		default:
			t.Fatalf("step %d (%s): Draining not closed after a drain", i, st)
		}
	}
	select {
	case <-cl.Done():
		t.Fatalf("Done closed on a drain and an undrain: %v", cl.Err())
	default:
	}
}

// A claim whose monitor starts after its instance drained, was made ready
// again and drained again (the instance drains now) is told draining
// once: the monitor replays the three changes from the grant, and each
// that would change what it says is checked against the key as it is now.
// Found by a review (2026-12-05): the replayed undrain was taken as
// current, so DrainState went true, false, true.
func TestDrainStateReplayNotStale(t *testing.T) {
	ctx, c, _, cl := claimOnInstance(t)
	for _, st := range []coordinator.InstanceState{coordinator.InstanceDraining, coordinator.InstanceReady, coordinator.InstanceDraining} {
		if _, err := c.SetInstanceState(ctx, "p", "i1", st); err != nil {
			t.Fatal(err)
		}
	}
	var seen []bool
	for {
		on, changed := cl.DrainState() // the first call starts the monitor
		seen = append(seen, on)
		select {
		case <-changed:
			continue
		case <-time.After(time.Second):
		}
		break
	}
	if want := []bool{false, true}; !slices.Equal(seen, want) && !slices.Equal(seen, want[1:]) {
		t.Fatalf("DrainState said %v; want %v (or %v)", seen, want, want[1:])
	}
}

// A live drain or undrain is recorded as the watch delivers it, without a
// read. So a read of the instance key that stalls (a client's Get sent to
// a member cut off from the leader, while its watch is on a healthy one)
// does not keep the claim's monitor from the instance's delete. Found by a
// review (2026-12-05): after a live undrain the monitor sat in that read,
// and Done stayed open after the instance went.
func TestDrainStateLiveEventNeedsNoRead(t *testing.T) {
	ctx := testkit.Ctx(t, 20*time.Second)
	op, c, stall := stalledInstanceReads(t, 2, "i1")
	s := testkit.Session(t, c.Client(), 10*time.Second)
	cl := mustClaim(t, ctx, c, s, "p", coordinator.WithInstance("i1"))
	cl.DrainState() // the monitor watches from here
	stall.Store(true)
	for _, st := range []coordinator.InstanceState{coordinator.InstanceDraining, coordinator.InstanceReady} {
		if _, err := op.SetInstanceState(ctx, "p", "i1", st); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 3*time.Second, "DrainState to follow a live "+string(st), func() bool {
			on, _ := cl.DrainState()
			return on == (st == coordinator.InstanceDraining)
		})
	}
	if err := op.DeregisterInstance(ctx, "p", "i1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cl.Done():
		if !errors.Is(cl.Err(), coordinator.ErrInstanceGone) {
			t.Fatalf("Done after the instance's delete: %v; want ErrInstanceGone", cl.Err())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Done still open 3s after the instance's delete")
	}
}

// A replayed drain is not checked by a read either: the monitor, started
// after the drain and a later write, tells the last state of the
// instance's key in each watch response. Found by a review (2026-12-05):
// the monitor read the key to confirm a replayed drain, and while that
// read stalled it did not see its seat's force-release, though a waiter
// was granted the seat: Done stayed open.
func TestReplayedDrainNeedsNoRead(t *testing.T) {
	ctx := testkit.Ctx(t, 30*time.Second)
	op, c, stall := stalledInstanceReads(t, 1, "i1", "i2")
	s := testkit.Session(t, c.Client(), 10*time.Second)
	cl := mustClaim(t, ctx, c, s, "p", coordinator.WithInstance("i1"))
	if _, err := op.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	// A waiter of another process, for the pool's one seat: its queue key
	// is written after the drain, so the monitor's first response replays it.
	ws := testkit.Session(t, op.Client(), 10*time.Second)
	granted := make(chan *coordinator.Claim, 1)
	go func() {
		w, err := op.Claim(ctx, ws, "p", coordinator.WithWait())
		if err != nil {
			t.Error(err)
			return
		}
		granted <- w
	}()
	testkit.Eventually(t, 3*time.Second, "the waiter to queue", func() bool {
		q, err := op.Queue(ctx, "p")
		return err == nil && len(q) == 1
	})
	stall.Store(true)
	testkit.Eventually(t, 3*time.Second, "DrainState to tell the replayed drain", func() bool {
		on, _ := cl.DrainState() // the first call starts the monitor
		return on
	})
	if _, err := op.ForceRelease(ctx, "p", cl.Seat(), cl.Token(), "test"); err != nil {
		t.Fatal(err)
	}
	var w *coordinator.Claim
	select {
	case w = <-granted:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not granted the force-released seat")
	}
	select {
	case <-cl.Done():
		if !errors.Is(cl.Err(), coordinator.ErrForceReleased) {
			t.Fatalf("Done after the force-release: %v; want ErrForceReleased", cl.Err())
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("Done still open 3s after the seat was force-released and granted again (token %d)", w.Token())
	}
}

// stalledInstanceReads makes pool p of the given capacity with instances
// ids, registered by an agent's session, and returns an operator's
// Coordinator op and a Coordinator c on a client whose reads of instance
// i1's key are held, once stall is set, until the test ends: as by a
// member that cannot reach the leader.
func stalledInstanceReads(t *testing.T, capacity int, ids ...string) (op, c *coordinator.Coordinator, stall *atomic.Bool) {
	stall = new(atomic.Bool)
	released := make(chan struct{})
	t.Cleanup(func() { close(released) })
	var instKey atomic.Value
	ic := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*pb.RangeRequest); ok && stall.Load() && string(r.Key) == instKey.Load() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-released:
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	op, cli := newCoord(t)
	c = testkit.Coordinator(t, newObservedClient(t, cli.Endpoints()[0], ic), coordinator.WithPrefix(op.Prefix()))
	instKey.Store(op.Prefix() + "/pools/p/instances/i1")
	testkit.CreatePool(t, op, "p", coordinator.PoolSpec{Capacity: capacity})
	agent := testkit.Session(t, cli, 10*time.Second)
	for _, id := range ids {
		if _, err := op.RegisterInstance(testkit.Ctx(t, 5*time.Second), "p", agent.Lease(), coordinator.Instance{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return op, c, stall
}

// claimOnInstance makes pool p, capacity 2, with instance i1 registered by
// an agent's session, and a claim bound to i1 under session s.
func claimOnInstance(t *testing.T) (context.Context, *coordinator.Coordinator, *coordinator.Session, *coordinator.Claim) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1"}); err != nil {
		t.Fatal(err)
	}
	s := testkit.Session(t, cli, 10*time.Second)
	return ctx, c, s, mustClaim(t, ctx, c, s, "p", coordinator.WithInstance("i1"))
}
