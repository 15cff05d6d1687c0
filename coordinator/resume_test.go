package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// orphanedClaim claims the only seat of pool p with a 2 s session, then
// stops that session's keepalives without revoking it, as a process killed
// with SIGKILL would. It returns the lease, seat and token left behind.
func orphanedClaim(t *testing.T, ctx context.Context, c *coordinator.Coordinator, cli *clientv3.Client, opts ...coordinator.ClaimOption) (clientv3.LeaseID, int, int64) {
	t.Helper()
	old := testkit.Session(t, cli, 2*time.Second)
	cl := mustClaim(t, ctx, c, old, "p", opts...)
	old.Orphan()
	return old.Lease(), cl.Seat(), cl.Token()
}

// resume resumes lease and adopts seat under token, or fails the test.
func resume(t *testing.T, ctx context.Context, c *coordinator.Coordinator, cli *clientv3.Client, lease clientv3.LeaseID, seat int, token int64) (*coordinator.Session, *coordinator.Claim) {
	t.Helper()
	s, err := coordinator.ResumeSession(ctx, cli, lease)
	if err != nil {
		t.Fatalf("ResumeSession: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	cl, err := c.Adopt(ctx, s, "p", seat, token)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	return s, cl
}

// TestResumeAdoptsSeatOfDeadProcess: a session orphaned like a killed
// process is resumed within its TTL; the seat is adopted with the same
// token, stays held past the TTL, is fenced by IsOwner and releases.
func TestResumeAdoptsSeatOfDeadProcess(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	lease, seat, token := orphanedClaim(t, ctx, c, cli, coordinator.WithHolder("h"))

	before := time.Now()
	s, cl := resume(t, ctx, c, cli, lease, seat, token)
	after := time.Now()
	if s.Lease() != lease || s.TTL() != 2*time.Second {
		t.Fatalf("resumed lease %x ttl %v, want %x 2s", s.Lease(), s.TTL(), lease)
	}
	// The local deadline starts at the keepalive's send: before the call
	// returned, and no earlier than the call began.
	margin := s.Margin()
	if margin != coordinator.MinMargin {
		t.Errorf("margin %v, want the default for a 2 s TTL, %v", margin, coordinator.MinMargin)
	}
	if d := s.Deadline(); d.Before(before.Add(2*time.Second-margin)) || d.After(after.Add(2*time.Second-margin)) {
		t.Errorf("deadline %v outside [%v, %v]", d, before.Add(2*time.Second-margin), after.Add(2*time.Second-margin))
	}
	if cl.Seat() != seat || cl.Token() != token || cl.Holder() != "h" || cl.Lease() != lease {
		t.Fatalf("adopted seat %d token %d holder %q, want %d %d h", cl.Seat(), cl.Token(), cl.Holder(), seat, token)
	}
	// Past the old TTL, the resumed keepalives hold the seat.
	time.Sleep(3 * time.Second)
	resp, err := cli.Txn(ctx).If(cl.IsOwner()).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("IsOwner after 1.5 TTL: %v, %v", resp, err)
	}
	select {
	case <-cl.Done():
		t.Fatalf("adopted claim lost: %v", cl.Err())
	default:
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ss, _ := c.Seats(ctx, "p"); len(ss) != 0 {
		t.Errorf("seats after release: %+v", ss)
	}
}

func TestResumeSessionOfGoneLeaseIsExpired(t *testing.T) {
	_, cli := newCoord(t)
	ctx := testkit.Ctx(t, 10*time.Second)
	old := testkit.Session(t, cli, 2*time.Second)
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := coordinator.ResumeSession(ctx, cli, old.Lease()); !errors.Is(err, coordinator.ErrSessionExpired) {
		t.Fatalf("ResumeSession of a revoked lease: %v, want ErrSessionExpired", err)
	}
	if _, err := coordinator.ResumeSession(ctx, cli, clientv3.NoLease); !errors.Is(err, coordinator.ErrInvalid) {
		t.Fatalf("ResumeSession of no lease: %v, want ErrInvalid", err)
	}
}

// TestAdoptRefusesWhatTheServerDoesNotShow: every refusal comes from the
// seat key as etcd holds it.
func TestAdoptRefusesWhatTheServerDoesNotShow(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 2})
	mine := testkit.Session(t, cli, 5*time.Second)
	held := mustClaim(t, ctx, c, mine, "p")
	other := mustClaim(t, ctx, c, testkit.Session(t, cli, 5*time.Second), "p")
	for _, tc := range []struct {
		name  string
		seat  int
		token int64
		want  error
	}{
		{"wrong token", held.Seat(), held.Token() + 100, coordinator.ErrStaleToken},
		{"another lease's seat", other.Seat(), other.Token(), coordinator.ErrNotHeld},
		{"free seat", 5, 1, coordinator.ErrNotHeld},
		{"bad seat", -1, 1, coordinator.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := c.Adopt(ctx, mine, "p", tc.seat, tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("Adopt: %v, want %v", err, tc.want)
			}
		})
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Adopt(ctx, mine, "p", held.Seat(), held.Token()); !errors.Is(err, coordinator.ErrNotHeld) {
		t.Fatalf("Adopt after release: %v, want ErrNotHeld", err)
	}
	if err := mine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Adopt(ctx, mine, "p", other.Seat(), other.Token()); !errors.Is(err, coordinator.ErrSessionExpired) && !errors.Is(err, coordinator.ErrClosed) {
		t.Fatalf("Adopt on a closed session: %v, want it refused", err)
	}
}

// TestAdoptedClaimBoundToInstance: the adopted claim carries its instance
// as registered, and reports its instance leaving.
func TestAdoptedClaimBoundToInstance(t *testing.T) {
	c, cli := newCoord(t)
	ctx := testkit.Ctx(t, 20*time.Second)
	testkit.CreatePool(t, c, "p", coordinator.PoolSpec{Capacity: 1})
	agent := testkit.Session(t, cli, 5*time.Second)
	if _, err := c.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "i1", Addr: "10.0.0.1:80", Labels: map[string]string{"z": "a"}}); err != nil {
		t.Fatal(err)
	}
	lease, seat, token := orphanedClaim(t, ctx, c, cli)
	_, cl := resume(t, ctx, c, cli, lease, seat, token)
	in, ok := cl.Instance()
	if !ok || in.ID != "i1" || in.Addr != "10.0.0.1:80" || in.Labels["z"] != "a" {
		t.Fatalf("adopted instance %+v (%v)", in, ok)
	}
	if err := c.DeregisterInstance(ctx, "p", "i1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cl.Done():
	case <-ctx.Done():
		t.Fatal("adopted claim did not see its instance leave")
	}
	if !errors.Is(cl.Err(), coordinator.ErrInstanceGone) {
		t.Fatalf("Err = %v, want ErrInstanceGone", cl.Err())
	}
}

// ExampleCoordinator_Adopt: a process that crashed while holding a seat is
// restarted within the lease's TTL and takes the seat back from what it
// saved (lease, seat, token), instead of queueing again.
func ExampleCoordinator_Adopt() {
	ctx := context.Background()
	cli := exampleClient()
	defer cli.Close()
	c, _ := coordinator.New(cli, coordinator.WithPrefix(examplePrefix("/example/adopt")))
	defer c.Close()
	_, _ = c.CreatePool(ctx, "gpu", coordinator.PoolSpec{Capacity: 1})

	// The first run claims and saves lease, seat and token, then dies.
	first, _ := coordinator.NewSession(ctx, cli, coordinator.WithTTL(10*time.Second))
	cl, _ := c.Claim(ctx, first, "gpu")
	lease, seat, token := first.Lease(), cl.Seat(), cl.Token()
	first.Orphan() // as if killed: no release, no revoke

	// The restarted run resumes the lease and adopts the seat.
	s, err := coordinator.ResumeSession(ctx, cli, lease)
	if err != nil {
		fmt.Println("lease gone, claim afresh:", err)
		return
	}
	defer s.Close(ctx)
	again, err := c.Adopt(ctx, s, "gpu", seat, token)
	if err != nil {
		fmt.Println("seat gone, claim afresh:", err)
		return
	}
	fmt.Println("same seat and token:", again.Seat() == seat, again.Token() == token)
	_, err = c.Adopt(ctx, s, "gpu", seat, token-1)
	fmt.Println("a stale token is refused:", errors.Is(err, coordinator.ErrStaleToken))
	fmt.Println("release:", again.Release(ctx))
	// Output:
	// same seat and token: true true
	// a stale token is refused: true
	// release: <nil>
}
