package coordinator_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestCapacityChange(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	p := createPoolRev(t, c, "p", coordinator.PoolSpec{Capacity: 4})
	s := testkit.Session(t, cli, 10*time.Second)
	var held []*coordinator.Claim
	for range 4 {
		cl, err := c.Claim(ctx, s, "p")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, cl)
	}
	// Shrink to 2: all four keep their seats, nothing new until held < 2.
	p, err := c.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 2}, p.Revision)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range held {
		if _, err := c.Seat(ctx, "p", cl.Seat()); err != nil {
			t.Fatalf("holder of seat %d lost it on shrink: %v", cl.Seat(), err)
		}
	}
	for i, want := range []bool{false, false, true} { // held 3, 2, then 1 < 2
		if err := held[i].Release(ctx); err != nil {
			t.Fatal(err)
		}
		cl, err := c.Claim(ctx, s, "p")
		if got := err == nil; got != want {
			t.Fatalf("after %d releases: claim granted=%v (%v), want %v", i+1, got, err, want)
		}
		if err == nil {
			held[i] = cl
		}
	}
	// Grow to 5 with a waiter queued: it is granted at once.
	got := waitingClaim(ctx, c, s, "p")
	waitQueued(t, c, "p", 1)
	if _, err := c.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 5}, p.Revision); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after growth: %v", err)
	}
	if _, err := c.UpdatePool(ctx, "p", coordinator.PoolSpec{Capacity: 5}, p.Revision); !errors.Is(err, coordinator.ErrConflict) {
		t.Fatalf("update with a stale revision: %v", err)
	}
}

func createPoolRev(t testing.TB, c *coordinator.Coordinator, name string, spec coordinator.PoolSpec) coordinator.Pool {
	t.Helper()
	p, err := c.CreatePool(testkit.Ctx(t, 10*time.Second), name, spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLongNameIsNotEchoed: an error about a 10,000-byte name quotes a
// bounded part of it.
func TestLongNameIsNotEchoed(t *testing.T) {
	err := coordinator.ValidateName(strings.Repeat("x", 10_000))
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("error of %d bytes: %.300v", len(err.Error()), err)
	}
}

func TestBadInput(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "ok", coordinator.PoolSpec{Capacity: 1})
	s := testkit.Session(t, cli, 10*time.Second)
	long := strings.Repeat("x", coordinator.MaxNameLen+1)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"empty pool name", err2(c.CreatePool(ctx, "", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"slash in name", err2(c.CreatePool(ctx, "a/b", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"space in name", err2(c.CreatePool(ctx, "a b", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"control char in name", err2(c.CreatePool(ctx, "a\x01", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"non-ASCII name", err2(c.CreatePool(ctx, "café", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"name too long", err2(c.CreatePool(ctx, long, coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"name .", err2(c.CreatePool(ctx, ".", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"name ..", err2(c.CreatePool(ctx, "..", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrInvalid},
		{"capacity 0", err2(c.CreatePool(ctx, "z", coordinator.PoolSpec{Capacity: 0})), coordinator.ErrInvalid},
		{"capacity negative", err2(c.CreatePool(ctx, "z", coordinator.PoolSpec{Capacity: -1})), coordinator.ErrInvalid},
		{"capacity too big", err2(c.CreatePool(ctx, "z", coordinator.PoolSpec{Capacity: coordinator.MaxCapacity + 1})), coordinator.ErrInvalid},
		{"ttl below etcd minimum", err2(c.CreatePool(ctx, "z", coordinator.PoolSpec{Capacity: 1, SeatTTLSeconds: 1})), coordinator.ErrInvalid},
		{"negative tenant limit", err2(c.CreatePool(ctx, "z", coordinator.PoolSpec{Capacity: 1, TenantLimit: -1})), coordinator.ErrInvalid},
		{"bad tenant override name", err2(c.CreatePool(ctx, "z", coordinator.PoolSpec{Capacity: 1, TenantLimits: map[string]int{"a/b": 1}})), coordinator.ErrInvalid},
		{"negative tenant override", err2(c.CreatePool(ctx, "z", coordinator.PoolSpec{Capacity: 1, TenantLimits: map[string]int{"a": -1}})), coordinator.ErrInvalid},
		{"duplicate pool", err2(c.CreatePool(ctx, "ok", coordinator.PoolSpec{Capacity: 1})), coordinator.ErrPoolExists},
		{"unknown pool get", err2(c.GetPool(ctx, "nope")), coordinator.ErrPoolNotFound},
		{"unknown pool claim", err2(c.Claim(ctx, s, "nope")), coordinator.ErrPoolNotFound},
		{"unknown pool update", err2(c.UpdatePool(ctx, "nope", coordinator.PoolSpec{Capacity: 1}, 0)), coordinator.ErrPoolNotFound},
		{"unknown pool delete", c.DeletePool(ctx, "nope", false), coordinator.ErrPoolNotFound},
		{"claim bad tenant", err2(c.Claim(ctx, s, "ok", coordinator.WithTenant("a/b"))), coordinator.ErrInvalid},
		{"claim empty holder", err2(c.Claim(ctx, s, "ok", coordinator.WithHolder(""))), coordinator.ErrInvalid},
		{"claim nil session", err2(c.Claim(ctx, nil, "ok")), coordinator.ErrInvalid},
		{"claim unknown instance", err2(c.Claim(ctx, s, "ok", coordinator.WithInstance("ghost"))), coordinator.ErrInstanceNotFound},
		{"instance zero id", err2(c.RegisterInstance(ctx, "ok", s.Lease(), coordinator.Instance{})), coordinator.ErrInvalid},
		{"instance negative seats", err2(c.RegisterInstance(ctx, "ok", s.Lease(), coordinator.Instance{ID: "i", Seats: -1})), coordinator.ErrInvalid},
		{"instance bad state", err2(c.RegisterInstance(ctx, "ok", s.Lease(), coordinator.Instance{ID: "i", State: "on"})), coordinator.ErrInvalid},
		{"instance in unknown pool", err2(c.RegisterInstance(ctx, "nope", s.Lease(), coordinator.Instance{ID: "i"})), coordinator.ErrPoolNotFound},
		{"drain unknown instance", err2(c.SetInstanceState(ctx, "ok", "ghost", coordinator.InstanceDraining)), coordinator.ErrInstanceNotFound},
		{"seat out of range", err2(c.Seat(ctx, "ok", -1)), coordinator.ErrInvalid},
		{"seat not held", err2(c.Seat(ctx, "ok", 0)), coordinator.ErrSeatNotFound},
		{"force release free seat", err2(c.ForceRelease(ctx, "ok", 0, 5, "x")), coordinator.ErrSeatNotFound},
		{"session ttl too short", err2(coordinator.NewSession(ctx, cli, coordinator.WithTTL(time.Second))), coordinator.ErrInvalid},
		{"prefix without slash", err2(coordinator.New(cli, coordinator.WithPrefix("etcdpool"))), coordinator.ErrInvalid},
		{"prefix with trailing slash", err2(coordinator.New(cli, coordinator.WithPrefix("/etcdpool/"))), coordinator.ErrInvalid},
		{"nil client", err2(coordinator.New(nil)), coordinator.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("got %v, want %v", tc.err, tc.want)
			}
		})
	}
}

func err2[T any](_ T, err error) error { return err }

// TestCorruptSpec writes spec JSON by hand, as an operator with etcdctl
// might, and checks that every reader reports ErrBadSpec instead of
// panicking or granting seats.
func TestCorruptSpec(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	s := testkit.Session(t, cli, 10*time.Second)
	for name, raw := range map[string]string{
		"notjson":  "{capacity: 3",
		"empty":    "",
		"wrongtyp": `{"capacity":"three"}`,
		"zero":     `{"capacity":0}`,
		"unknown":  `{"capacity":3,"colour":"red"}`,
		"trailing": `{"capacity":3} {}`,
		"null":     `null`,
		"huge":     `{"capacity":99999999999999999999}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := cli.Put(ctx, c.Prefix()+"/pools/"+name+"/spec", raw); err != nil {
				t.Fatal(err)
			}
			if _, err := c.GetPool(ctx, name); !errors.Is(err, coordinator.ErrBadSpec) {
				t.Fatalf("GetPool: %v", err)
			}
			if _, err := c.Claim(ctx, s, name); !errors.Is(err, coordinator.ErrBadSpec) {
				t.Fatalf("Claim: %v", err)
			}
			st, err := c.PoolStatus(ctx, name)
			if err != nil || st.SpecError == "" {
				t.Fatalf("PoolStatus: %+v %v", st, err)
			}
			// An operator can repair it in place.
			if _, err := c.UpdatePool(ctx, name, coordinator.PoolSpec{Capacity: 1}, 0); err != nil {
				t.Fatalf("repair: %v", err)
			}
			if _, err := c.Claim(ctx, s, name); err != nil {
				t.Fatalf("claim after repair: %v", err)
			}
		})
	}
	pools, err := c.ListPools(ctx)
	if err != nil || len(pools) != 8 {
		t.Fatalf("ListPools: %d pools, %v", len(pools), err)
	}
}

// TestMissingPoolsNotCached: claims on pools that do not exist, or no
// longer do, leave no cached state behind: a long-lived Coordinator asked
// for any names (an HTTP API passes the path's through) does not grow.
// Found by a review (2026-12-04): 300 missing names kept 300 states.
func TestMissingPoolsNotCached(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 30*time.Second)
	s := testkit.Session(t, cli, 30*time.Second)
	testkit.CreatePool(t, c, "gone", coordinator.PoolSpec{Capacity: 100})
	if err := mustClaim(t, ctx, c, s, "gone").Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePool(ctx, "gone", false); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := c.Claim(ctx, s, fmt.Sprintf("missing-%d", i)); !errors.Is(err, coordinator.ErrPoolNotFound) {
			t.Fatalf("claim on a missing pool: %v; want ErrPoolNotFound", err)
		}
	}
	if _, err := c.Claim(ctx, s, "gone"); !errors.Is(err, coordinator.ErrPoolNotFound) {
		t.Fatalf("claim on a deleted pool: %v; want ErrPoolNotFound", err)
	}
	if n := coordinator.CachedPools(c); n != 0 {
		t.Fatalf("%d pools cached after claims on missing and deleted ones; want 0", n)
	}
}
