package coordinator_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestStaleReleaseDeletesNothing: a holder that lost its seat and a newer
// holder that took the same seat; the stale release and a ForceRelease with
// the old token must leave the newer claim alone (etcd#22082).
func TestStaleReleaseDeletesNothing(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1, TenantLimit: 1})
	old := testkit.Session(t, cli, 10*time.Second)
	stale := mustClaim(t, ctx, c, old, "p", coordinator.WithTenant("acme"))
	if _, err := cli.Revoke(ctx, old.Lease()); err != nil { // the old holder "dies"
		t.Fatal(err)
	}
	fresh := mustClaim(t, ctx, c, testkit.Session(t, cli, 10*time.Second), "p", coordinator.WithTenant("acme"))
	if fresh.Seat() != stale.Seat() || fresh.Token() <= stale.Token() {
		t.Fatalf("want the same seat under a newer token: stale %d/%d fresh %d/%d", stale.Seat(), stale.Token(), fresh.Seat(), fresh.Token())
	}
	if err := stale.Release(ctx); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("stale release: got %v, want ErrNotHeld", err)
	}
	if _, err := c.ForceRelease(ctx, "p", stale.Seat(), stale.Token(), "stale"); !errors.Is(err, coordinator.ErrStaleToken) {
		t.Fatalf("stale force-release: got %v, want ErrStaleToken", err)
	}
	seat, err := c.Seat(ctx, "p", fresh.Seat())
	if err != nil || seat.Token != fresh.Token() {
		t.Fatalf("the newer claim was touched: %+v %v", seat, err)
	}
	// The tenant slot of the newer claim survives too.
	resp, err := cli.Get(ctx, c.Prefix()+"/pools/p/tenants/acme/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != fresh.Token() {
		t.Fatalf("tenant slot after stale release: %v %v", resp.Kvs, err)
	}
	// IsOwner fences the holder's own writes.
	txn, err := cli.Txn(ctx).If(stale.IsOwner()).Then(clientv3.OpPut("/downstream", "stale write")).Commit()
	if err != nil || txn.Succeeded {
		t.Fatalf("stale holder's fenced write went through: %v", err)
	}
	txn, err = cli.Txn(ctx).If(fresh.IsOwner()).Then(clientv3.OpPut("/downstream", "fresh write")).Commit()
	if err != nil || !txn.Succeeded {
		t.Fatalf("holder's fenced write refused: %v", err)
	}
}

func TestForceReleaseTellsTheHolder(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	s := testkit.Session(t, cli, 10*time.Second)
	cl := mustClaim(t, ctx, c, s, "p")
	done := cl.Done()
	if _, err := c.ForceRelease(ctx, "p", cl.Seat(), cl.Token()+1, "wrong token"); !errors.Is(err, coordinator.ErrStaleToken) {
		t.Fatalf("wrong token: %v", err)
	}
	seat, err := c.ForceRelease(ctx, "p", cl.Seat(), cl.Token(), "wedged bot")
	if err != nil || seat.Token != cl.Token() {
		t.Fatalf("force release: %+v %v", seat, err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Done did not close after a force-release")
	}
	if err := cl.Err(); !errors.Is(err, coordinator.ErrForceReleased) || !strings.Contains(err.Error(), "wedged bot") {
		t.Fatalf("Err = %v, want ErrForceReleased with the reason", err)
	}
	if _, err := c.ForceRelease(ctx, "p", cl.Seat(), cl.Token(), "again"); !errors.Is(err, coordinator.ErrSeatNotFound) {
		t.Fatalf("second force release: %v", err)
	}
}

func TestDoneReasons(t *testing.T) {
	// The seat of a gone instance is freed after a hold (its own test:
	// TestGoneInstanceNotReboundWithinHold); short here.
	c, cli := newCoord(t, coordinator.WithInstanceGoneHold(100*time.Millisecond))
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "bot-1", Addr: "10.0.0.1:80"}); err != nil {
		t.Fatal(err)
	}
	wait := func(cl *coordinator.Claim, want error) {
		t.Helper()
		select {
		case <-cl.Done():
		case <-ctx.Done():
			t.Fatalf("Done did not close, want %v", want)
		}
		if !errors.Is(cl.Err(), want) {
			t.Fatalf("Err = %v, want %v", cl.Err(), want)
		}
	}

	s := testkit.Session(t, cli, 10*time.Second)
	bound := mustClaim(t, ctx, c, s, "p")
	if in, ok := bound.Instance(); !ok || in.ID != "bot-1" || in.Addr != "10.0.0.1:80" {
		t.Fatalf("claim bound to %+v %v", in, ok)
	}
	if _, err := c.Claim(ctx, s, "p"); !errors.Is(err, coordinator.ErrNoSeat) {
		t.Fatalf("an exclusive instance was bound twice: %v", err)
	}
	_ = bound.Done()
	if _, err := cli.Revoke(ctx, agent.Lease()); err != nil { // the agent dies
		t.Fatal(err)
	}
	wait(bound, coordinator.ErrInstanceGone)
	testkit.Eventually(t, 10*time.Second, "the seat of the gone instance to be freed", func() bool {
		st, err := c.PoolStatus(ctx, "p")
		return err == nil && st.Held == 0
	})

	short, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	exp := mustClaim(t, ctx, c, short, "p")
	_ = exp.Done()
	if _, err := cli.Revoke(ctx, short.Lease()); err != nil { // expired on the server
		t.Fatal(err)
	}
	wait(exp, coordinator.ErrSessionExpired)
	short.Orphan()

	gone := mustClaim(t, ctx, c, s, "p")
	_ = gone.Done()
	if err := c.DeletePool(ctx, "p", false); !errors.Is(err, coordinator.ErrPoolInUse) {
		t.Fatalf("delete of a pool in use: %v", err)
	}
	if err := c.DeletePool(ctx, "p", true); err != nil {
		t.Fatal(err)
	}
	wait(gone, coordinator.ErrPoolDeleted)
}

// TestLocalDeadlineFiresBeforeServerExpiry cuts the session off from etcd
// (the member stops) and checks that Done closes before the server-side
// lease could have expired: at most TTL after the last keepalive.
func TestLocalDeadlineFiresBeforeServerExpiry(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	var failures atomic.Int64
	s, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(3*time.Second),
		coordinator.WithKeepAliveFailure(func(error) { failures.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Orphan()
	cl := mustClaim(t, ctx, c, s, "p")
	_ = cl.Done()
	deadline := s.Deadline()
	if until := time.Until(deadline); until <= 0 || until > 3*time.Second {
		t.Fatalf("local deadline %v from now, want within the TTL", until)
	}
	// A client that can no longer reach etcd: close its connection.
	cli.Close()
	select {
	case <-cl.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close after etcd became unreachable")
	}
	if !errors.Is(cl.Err(), coordinator.ErrSessionExpired) {
		t.Fatalf("Err = %v", cl.Err())
	}
	if late := time.Since(s.Deadline()); late > time.Second {
		t.Fatalf("Done closed %v after the local deadline", late)
	}
	if failures.Load() == 0 {
		t.Fatal("the keepalive failure hook was never called")
	}
}

// TestDeadlineMovedHook checks that WithDeadlineMoved tells each move of
// the local deadline, in order, as Deadline then reads it, and nothing
// after Close.
func TestDeadlineMovedHook(t *testing.T) {
	_, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	moved := make(chan time.Time, 100)
	s, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(2*time.Second),
		coordinator.WithDeadlineMoved(func(d time.Time) { moved <- d }))
	if err != nil {
		t.Fatal(err)
	}
	last := s.Deadline()
	for i := range 3 { // a keepalive every TTL/3
		select {
		case d := <-moved:
			if !d.After(last) {
				t.Fatalf("move %d: deadline %v is not after the one before, %v", i, d, last)
			}
			if got := s.Deadline(); got.Before(d) {
				t.Fatalf("move %d: told %v, Deadline says %v", i, d, got)
			}
			last = d
		case <-time.After(2 * time.Second):
			t.Fatalf("move %d: no deadline move told within the TTL", i)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for len(moved) > 0 { // told before Close returned
		<-moved
	}
	select {
	case d := <-moved:
		t.Fatalf("a deadline move told after Close returned: %v", d)
	case <-time.After(time.Second): // past the next keepalive
	}
}
