package coordinator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

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
