package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestInstanceWritesAreBoundToTheOwnerLease registers an instance under
// agent A's lease, with a claim bound to it, and checks that agent B can
// neither register it nor, once B has taken it over, can A change or
// delete it; the claim survives the handover.
func TestInstanceWritesAreBoundToTheOwnerLease(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	a, b := testkit.Session(t, cli, 10*time.Second), testkit.Session(t, cli, 10*time.Second)
	in := coordinator.Instance{ID: "i1", Seats: 2, Agent: "a"}
	if _, err := c.RegisterInstance(ctx, "p", a.Lease(), in); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterInstance(ctx, "p", a.Lease(), in); err != nil {
		t.Fatalf("re-register under the same lease: %v", err)
	}
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p", coordinator.WithInstance("i1"))

	var owned *coordinator.InstanceOwnedError
	_, err := c.RegisterInstance(ctx, "p", b.Lease(), coordinator.Instance{ID: "i1", Agent: "b"})
	if !errors.As(err, &owned) || owned.Owner != a.Lease() || owned.Agent != "a" || !errors.Is(err, coordinator.ErrConflict) {
		t.Fatalf("register under another lease: %v, want an InstanceOwnedError naming lease %x", err, a.Lease())
	}
	if _, err := c.TakeOverInstance(ctx, "p", &coordinator.InstanceOwnedError{Owner: b.Lease()}, b.Lease(), coordinator.Instance{ID: "i1"}); !errors.As(err, &owned) {
		t.Fatalf("take over from the wrong lease: %v", err)
	}
	if _, err := c.SetInstanceStateIfOwner(ctx, "p", "i1", b.Lease(), coordinator.InstanceDraining); !errors.As(err, &owned) {
		t.Fatalf("drain by a non-owner: %v", err)
	}
	took, err := c.TakeOverInstance(ctx, "p", &coordinator.InstanceOwnedError{Owner: a.Lease()}, b.Lease(), coordinator.Instance{ID: "i1", Seats: 2, Agent: "b"})
	if err != nil || took.Lease != b.Lease() {
		t.Fatalf("take over: %+v, %v", took, err)
	}

	if _, err := c.SetInstanceStateIfOwner(ctx, "p", "i1", a.Lease(), coordinator.InstanceDraining); !errors.As(err, &owned) || owned.Owner != b.Lease() {
		t.Errorf("drain by the old owner: %v, want an InstanceOwnedError naming lease %x", err, b.Lease())
	}
	if err := c.DeregisterInstanceIfOwner(ctx, "p", "i1", a.Lease()); !errors.As(err, &owned) {
		t.Errorf("deregister by the old owner: %v", err)
	}
	if err := a.Close(ctx); err != nil { // the old agent's lease goes
		t.Fatal(err)
	}
	got, err := c.GetInstance(ctx, "p", "i1")
	if err != nil || got.Lease != b.Lease() || got.State != coordinator.InstanceReady || got.Agent != "b" {
		t.Fatalf("instance after the handover: %+v, %v", got, err)
	}
	select {
	case <-cl.Done():
		t.Fatalf("the claim on the handed-over instance ended: %v", cl.Err())
	case <-time.After(300 * time.Millisecond): // the monitor sees a delete within ms
	}
	if _, err := c.SetInstanceStateIfOwner(ctx, "p", "i1", b.Lease(), coordinator.InstanceDraining); err != nil {
		t.Errorf("drain by the new owner: %v", err)
	}
	if err := c.DeregisterInstanceIfOwner(ctx, "p", "i1", b.Lease()); err != nil {
		t.Errorf("deregister by the new owner: %v", err)
	}
	if err := c.DeregisterInstanceIfOwner(ctx, "p", "i1", b.Lease()); !errors.Is(err, coordinator.ErrInstanceNotFound) {
		t.Errorf("deregister twice: %v, want ErrInstanceNotFound", err)
	}
	if _, err := c.TakeOverInstance(ctx, "p", &coordinator.InstanceOwnedError{Owner: a.Lease()}, b.Lease(), in); !errors.Is(err, coordinator.ErrInstanceNotFound) {
		t.Errorf("take over a gone instance: %v, want ErrInstanceNotFound", err)
	}
	if _, err := c.RegisterInstance(ctx, "nope", b.Lease(), in); !errors.Is(err, coordinator.ErrPoolNotFound) {
		t.Errorf("register in a missing pool: %v", err)
	}
}

// TestAnonSeatNotAfterInstanceJoins: a process whose view of a pool shows
// no instance (read once, no feed: a pool of over 64 seats) claims again
// after an agent has registered an exclusive instance. The pool binds
// every seat now: the first claim takes the instance, the second finds no
// seat, and none is anonymous. Found by a review (2026-12-04): all three
// claims were granted, unbound, while the instance's one seat was free.
func TestAnonSeatNotAfterInstanceJoins(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 100})
	if err := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p").Release(ctx); err != nil { // the view, read once
		t.Fatal(err)
	}
	agent := testkit.Session(t, cli, 30*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "w0", Seats: 1}); err != nil {
		t.Fatal(err)
	}
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	if in, ok := cl.Instance(); !ok || in.ID != "w0" {
		t.Fatalf("claim after the instance joined: bound %v to %q; want w0", ok, in.ID)
	}
	if _, err := c.Claim(ctx, testkit.Session(t, cli, 30*time.Second), "p"); !errors.Is(err, coordinator.ErrNoSeat) {
		t.Fatalf("second claim: %v; want ErrNoSeat, w0's one seat taken", err)
	}
}

// TestEmptyLabelValueNeedsTheLabel: a selector asks for an instance that
// carries each label with its value; one asked for with an empty value
// (poolctl run --label gpu=) must be there, empty. Found by a review
// (2026-12-04): an instance without the label matched.
func TestEmptyLabelValueNeedsTheLabel(t *testing.T) {
	sel := map[string]string{"gpu": ""}
	if (coordinator.Instance{ID: "cpu-0", Labels: map[string]string{"kind": "cpu"}}).Matches(sel) {
		t.Error("an instance without label gpu matches gpu=\"\"")
	}
	if !(coordinator.Instance{ID: "gpu-0", Labels: map[string]string{"gpu": ""}}).Matches(sel) {
		t.Error("an instance with label gpu=\"\" does not match it")
	}
}

// TestUnadmittedInstanceKeyLeavesSeatsAnonymous: a key under instances/
// whose value claims do not admit (here a state a newer agent might
// write) binds no seat, and must not fail every anonymous claim either:
// a claim on the pool gets an unbound seat. Once the key becomes an
// instance, claims bind to it. Found by a review of cecd1f3 (2026-12-05),
// whose compare that the instances' range is empty made such a claim
// retry until its deadline.
func TestUnadmittedInstanceKeyLeavesSeatsAnonymous(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 3})
	key := coordinator.SegPrefix(c.Prefix(), "p", coordinator.SegInstances) + "w0"
	if _, err := cli.Put(ctx, key, `{"id":"w0","seats":1,"state":"cordoned"}`); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := c.Claim(cctx, testkit.Session(t, cli, 30*time.Second), "p")
	if err != nil {
		t.Fatalf("claim on a pool whose one instance key is not an instance: %v", err)
	}
	if in, ok := cl.Instance(); ok {
		t.Fatalf("claim bound to %q, which is not an instance", in.ID)
	}
	if _, err := cli.Put(ctx, key, `{"id":"w0","seats":1,"state":"ready"}`); err != nil {
		t.Fatal(err)
	}
	cl, err = c.Claim(ctx, testkit.Session(t, cli, 30*time.Second), "p")
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := cl.Instance(); !ok || in.ID != "w0" {
		t.Fatalf("claim after w0 became an instance: bound %v to %q; want w0", ok, in.ID)
	}
}

// TestManyUnadmittedInstanceKeysSaySo: an anonymous seat's claim compares
// around each instance key that is not an instance; past 32 of them, a
// claim is refused with ErrForeignKey naming one, as for unleased queue
// keys, rather than send a txn of ever more compares.
func TestManyUnadmittedInstanceKeysSaySo(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 3})
	prefix := coordinator.SegPrefix(c.Prefix(), "p", coordinator.SegInstances)
	for i := range 33 {
		if _, err := cli.Put(ctx, fmt.Sprintf("%sw%02d", prefix, i), "not an instance"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Claim(ctx, testkit.Session(t, cli, 30*time.Second), "p"); !errors.Is(err, coordinator.ErrForeignKey) || !strings.Contains(err.Error(), prefix+"w00") {
		t.Fatalf("claim: %v; want ErrForeignKey naming %q", err, prefix+"w00")
	}
}

// Two instance IDs at one address of a pool would let two exclusive
// claims reach one worker: the second registration is refused with
// ErrConflict naming the first. Re-registering the same instance, another
// address, or another pool is fine. Found by a review (2026-12-05).
func TestInstanceAddressTakenRefused(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 10*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	testkit.CreatePool(t, c, "q", coordinator.PoolSpec{Capacity: 4})
	agent := testkit.Session(t, cli, 10*time.Second)
	reg := func(pool, id, addr string) error {
		_, err := c.RegisterInstance(ctx, pool, agent.Lease(), coordinator.Instance{ID: id, Addr: addr})
		return err
	}
	if err := reg("p", "a", "10.0.0.1:80"); err != nil {
		t.Fatal(err)
	}
	err := reg("p", "b", "10.0.0.1:80")
	if !errors.Is(err, coordinator.ErrConflict) || !strings.Contains(err.Error(), `instance "a"`) {
		t.Fatalf("second ID at one address: %v, want ErrConflict naming instance a", err)
	}
	other := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.TakeOverInstance(ctx, "p", &coordinator.InstanceOwnedError{Owner: agent.Lease()}, other.Lease(), coordinator.Instance{ID: "c", Addr: "10.0.0.1:80"}); !errors.Is(err, coordinator.ErrConflict) {
		t.Fatalf("takeover to an address taken: %v, want ErrConflict", err)
	}
	for _, ok := range [][3]string{{"p", "a", "10.0.0.1:80"}, {"p", "b", "10.0.0.2:80"}, {"q", "b", "10.0.0.1:80"}, {"p", "c", ""}, {"p", "d", ""}} {
		if err := reg(ok[0], ok[1], ok[2]); err != nil {
			t.Errorf("register %v: %v", ok, err)
		}
	}
}

// A take-back decided on a stopping mark must not undo an operator's drain
// written after the mark was read: agent B, which took i1 over, drains it
// to stop; agent A's registration is refused naming B's stopping lease;
// an operator drains i1 (clearing the mark); A's takeover with that
// refusal is refused, and i1 stays draining under B's lease. Before the
// takeover compared the key's revision (2026-12-05), A took it over and
// made it ready again.
func TestTakeOverRefusedAfterOperatorWrite(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 10*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	a, b := testkit.Session(t, cli, 10*time.Second), testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", b.Lease(), coordinator.Instance{ID: "i1", Agent: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetInstanceStateIfOwner(ctx, "p", "i1", b.Lease(), coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	_, err := c.RegisterInstance(ctx, "p", a.Lease(), coordinator.Instance{ID: "i1", Agent: "a"})
	var owned *coordinator.InstanceOwnedError
	if !errors.As(err, &owned) || !owned.Stopping || owned.Owner != b.Lease() || owned.Revision == 0 {
		t.Fatalf("A's registration: %v (%+v); want refused naming B's stopping lease and the key's revision", err, owned)
	}
	if _, err := c.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	_, err = c.TakeOverInstance(ctx, "p", owned, a.Lease(), coordinator.Instance{ID: "i1", Agent: "a"})
	var now *coordinator.InstanceOwnedError
	if !errors.As(err, &now) || now.Owner != b.Lease() || now.Stopping || now.Revision <= owned.Revision {
		t.Fatalf("take-over after the operator's drain: %v (%+v); want refused, naming B's lease, not stopping, a later revision", err, now)
	}
	in, err := c.GetInstance(ctx, "p", "i1")
	if err != nil || in.Lease != b.Lease() || in.State != coordinator.InstanceDraining {
		t.Fatalf("i1 after the refused take-over: %+v (%v); want draining under B's lease", in, err)
	}
	if _, err := c.TakeOverInstance(ctx, "p", now, a.Lease(), coordinator.Instance{ID: "i1", Agent: "a"}); err != nil {
		t.Fatalf("take-over with the refusal read now: %v", err) // the lease and revision as they are: applies
	}
	if _, err := c.TakeOverInstance(ctx, "p", nil, a.Lease(), coordinator.Instance{ID: "i1"}); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("take-over from nil: %v; want ErrInvalid", err)
	}
}

// Instance.Stopping says that the agent holding an instance drains it to
// stop: set when SetInstanceStateIfOwner takes it from ready to draining,
// not by an operator's drain (nor by the agent's drain of an instance an
// operator drained already), and cleared by any operator's write (so
// that an operator's drain is never undone by a take-back) and when it is
// made ready. Found by a review (2026-12-05): an operator's drain after
// the agent's kept it.
func TestInstanceStoppingOnlyByItsAgent(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 10*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what     string
		agent    bool // its agent's write (SetInstanceStateIfOwner), else an operator's
		state    coordinator.InstanceState
		stopping bool
	}{
		{"operator drains", false, coordinator.InstanceDraining, false},
		{"its agent drains it, drained already", true, coordinator.InstanceDraining, false},
		{"operator undrains", false, coordinator.InstanceReady, false},
		{"its agent drains it to stop", true, coordinator.InstanceDraining, true},
		{"operator drains it as well", false, coordinator.InstanceDraining, false},
		{"its agent drains it to stop again", true, coordinator.InstanceDraining, false},
		{"made ready", false, coordinator.InstanceReady, false},
	}
	for _, st := range steps {
		var err error
		if st.agent {
			_, err = c.SetInstanceStateIfOwner(ctx, "p", "i1", agent.Lease(), st.state)
		} else {
			_, err = c.SetInstanceState(ctx, "p", "i1", st.state)
		}
		if err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		in, err := c.GetInstance(ctx, "p", "i1")
		if err != nil || in.Stopping != st.stopping {
			t.Fatalf("%s: stopping %v (%v), want %v", st.what, in.Stopping, err, st.stopping)
		}
	}
}

// TestInstanceTextChecked: where an instance is written, its address and
// agent name must be printable text of at most 1024 and 256 bytes: a
// claimant passes the address on (poolctl run's ETCDPOOL_INSTANCE_ADDR,
// where a NUL makes the command's start fail) and operators read both;
// they were free-form. A reader takes what another client wrote (an older
// agent's longer address, say): it is read, drained and claimed on as
// before.
func TestInstanceTextChecked(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 3})
	lease := testkit.Session(t, cli, 30*time.Second).Lease()
	for _, in := range []coordinator.Instance{
		{ID: "nul", Addr: "h:1\x00"},
		{ID: "esc", Addr: "h:1", Agent: "a\x1b]0;pwned\x07"},
		{ID: "bidi", Addr: "h\u202e:1"},
		{ID: "utf8", Addr: "h:\xff"},
		{ID: "long", Addr: strings.Repeat("h", coordinator.MaxAddrLen+1)},
		{ID: "longagent", Agent: strings.Repeat("a", coordinator.MaxHolderLen+1)},
	} {
		if _, err := c.RegisterInstance(ctx, "p", lease, in); !errors.Is(err, coordinator.ErrInvalid) {
			t.Errorf("register %q: %v; want ErrInvalid", in.ID, err)
		}
	}
	if _, err := c.RegisterInstance(ctx, "p", lease, coordinator.Instance{ID: "ok", Addr: "10.0.0.5:9000", Agent: "pod-7"}); err != nil {
		t.Fatal(err)
	}
	key := coordinator.SegPrefix(c.Prefix(), "p", coordinator.SegInstances) + "w0"
	long := strings.Repeat("h", coordinator.MaxAddrLen+1)
	if _, err := cli.Put(ctx, key, fmt.Sprintf(`{"id":"w0","seats":1,"state":"ready","addr":%q}`, long), clientv3.WithLease(lease)); err != nil {
		t.Fatal(err)
	}
	if in, err := c.GetInstance(ctx, "p", "w0"); err != nil || in.Addr != long {
		t.Errorf("GetInstance of an older agent's longer address: %d bytes, %v", len(in.Addr), err)
	}
	if _, err := c.SetInstanceState(ctx, "p", "w0", coordinator.InstanceDraining); err != nil {
		t.Errorf("drain an instance with an older agent's longer address: %v", err)
	}
	if _, err := c.SetInstanceState(ctx, "p", "w0", coordinator.InstanceReady); err != nil {
		t.Errorf("undrain it: %v", err)
	}
	cl := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p", coordinator.WithInstance("w0"))
	if in, _ := cl.Instance(); in.Addr != long {
		t.Errorf("a claim on w0 has an address of %d bytes", len(in.Addr))
	}
}
