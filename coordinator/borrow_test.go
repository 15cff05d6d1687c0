package coordinator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// A borrowed session claims on a lease its owner keeps alive; it outlives
// its own TTL only through the owner's keepalives, ends when the owner
// stops them, and never revokes the lease.
func TestBorrowedSessionFollowsTheOwnersLease(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	testkit.CreatePool(t, c, "calls", coordinator.PoolSpec{Capacity: 1})
	owner := testkit.Session(t, cli, 2*time.Second)

	b, err := coordinator.BorrowSession(ctx, cli, owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if !b.Borrowed() || b.TTL() != 2*time.Second {
		t.Fatalf("borrowed = %v, TTL %v; want true, 2s", b.Borrowed(), b.TTL())
	}
	cl := mustClaim(t, ctx, c, b, "calls")
	cl.Detach()
	if !errors.Is(cl.Err(), coordinator.ErrClosed) {
		t.Fatalf("detached claim Err = %v, want ErrClosed", cl.Err())
	}
	// Past the TTL: a session that followed nothing would be gone by then.
	time.Sleep(2500 * time.Millisecond)
	if err := b.Err(); err != nil {
		t.Fatalf("borrowed session ended while its owner kept the lease alive: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Seat(ctx, "calls", cl.Seat()); err != nil {
		t.Fatalf("closing the borrowed session freed the seat (lease revoked?): %v", err)
	}

	b2, err := coordinator.BorrowSession(ctx, cli, owner.Lease())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b2.Close(context.Background()) })
	if _, err := cli.Revoke(ctx, owner.Lease()); err != nil { // the owner ends its session
		t.Fatal(err)
	}
	select {
	case <-b2.Done():
	case <-time.After(2 * time.Second): // it asks every TTL/3
		t.Fatal("borrowed session outlived its lease by 2s")
	}
	if !errors.Is(b2.Err(), coordinator.ErrSessionExpired) {
		t.Fatalf("Err = %v, want ErrSessionExpired", b2.Err())
	}
	if _, err := coordinator.BorrowSession(ctx, cli, owner.Lease()); !errors.Is(err, coordinator.ErrSessionExpired) {
		t.Fatalf("borrow of an expired lease: %v, want ErrSessionExpired", err)
	}
	if _, err := coordinator.BorrowSession(ctx, cli, clientv3.NoLease); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("borrow of no lease: %v, want ErrInvalid", err)
	}
}

// ReleaseBy and ForceReleaseBy record the identity given, and the holder
// of a force-released seat reads it in Err.
func TestReleaseByNamesTheReleaser(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "calls", coordinator.PoolSpec{Capacity: 2})
	s := testkit.Session(t, cli, 5*time.Second)
	a := mustClaim(t, ctx, c, s, "calls", coordinator.WithHolder("client-says-anything"))
	if err := a.ReleaseBy(ctx, ""); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("ReleaseBy(\"\") = %v, want ErrInvalid", err)
	}
	if err := a.ReleaseBy(ctx, "principal-a"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, coordinator.SegPrefix(c.Prefix(), "calls", coordinator.SegReleased), clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"by":"principal-a"`) {
		t.Fatalf("release record = %v, %v; want by principal-a", resp, err)
	}
	b := mustClaim(t, ctx, c, s, "calls")
	b.Done() // start the monitor before the force-release
	// The operator borrows the holder's lease and adopts the claim.
	op, err := coordinator.BorrowSession(ctx, cli, b.Lease())
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close(ctx)
	if _, err := c.Adopt(ctx, op, "calls", b.Seat(), b.Token()+1); !errors.Is(err, coordinator.ErrStaleToken) {
		t.Fatalf("adopt with a stale token: %v, want ErrStaleToken", err)
	}
	cl, err := c.Adopt(ctx, op, "calls", b.Seat(), b.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ForceReleaseBy(ctx, "abuse", "ops-team"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatal("holder not told of the force-release")
	}
	if err := b.Err(); !errors.Is(err, coordinator.ErrForceReleased) || !strings.Contains(err.Error(), "by ops-team: abuse") {
		t.Fatalf("holder's Err = %v, want force-released by ops-team: abuse", err)
	}
}
