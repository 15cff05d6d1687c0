package coordinator_test

import (
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestUncontendedClaimIsOneRoundTrip counts the unary RPCs a claim and a
// release send once the pool's state is cached: one each.
func TestUncontendedClaimIsOneRoundTrip(t *testing.T) {
	cli, calls := newCountingClient(t, "")
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix("/roundtrip"))
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 8})
	s := testkit.Session(t, cli, 30*time.Second)
	first, err := c.Claim(ctx, s, "p") // reads the pool once, then claims
	if err != nil {
		t.Fatal(err)
	}
	// The claim started the pool feed (keepFeed), which reads the pool in
	// the background; it lingers through the cycles below.
	testkit.Eventually(t, 10*time.Second, "the pool feed to sync", func() bool { return coordinator.FeedSynced(c, "p") })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		before := calls.Load()
		cl, err := c.Claim(ctx, s, "p")
		if err != nil {
			t.Fatal(err)
		}
		claimCalls := calls.Load() - before
		if err := cl.Release(ctx); err != nil {
			t.Fatal(err)
		}
		releaseCalls := calls.Load() - before - claimCalls
		if claimCalls != 1 || releaseCalls != 1 {
			t.Fatalf("cycle %d: claim took %d RPCs, release %d; want 1 each", i, claimCalls, releaseCalls)
		}
	}
}

// TestSeatsBoundsTTLLookups: listing the seats of many holders reads the
// pool once and asks for at most MaxTTLLookups lease TTLs, whatever the
// number of holders.
func TestSeatsBoundsTTLLookups(t *testing.T) {
	cli, ttlCalls := newCountingClient(t, "/etcdserverpb.Lease/LeaseTimeToLive")
	c := testkit.Coordinator(t, cli, coordinator.WithPrefix("/seatsttl"))
	ctx := testkit.Ctx(t, 60*time.Second)
	const holders = coordinator.MaxTTLLookups + 36
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: holders})
	for range holders {
		mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "p")
	}
	ttlCalls.Store(0)
	seats, err := c.Seats(ctx, "p")
	if err != nil || len(seats) != holders {
		t.Fatalf("Seats: %d seats, %v", len(seats), err)
	}
	known := 0
	for i, s := range seats {
		if s.TTL > 0 {
			known++
		}
		if i > 0 && seats[i-1].Seat >= s.Seat {
			t.Fatalf("seats out of order at %d", i)
		}
	}
	if n := ttlCalls.Load(); n > coordinator.MaxTTLLookups || known != coordinator.MaxTTLLookups {
		t.Fatalf("%d TTL requests, %d seats with a TTL; want %d of each", n, known, coordinator.MaxTTLLookups)
	}
}
