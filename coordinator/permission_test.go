package coordinator_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestPermissionDeniedEndsAtOnce: a claimant whose etcd user may read the
// pool but not write its seats gets the permission error at once, with
// and without wait, instead of waiting or retrying forever.
func TestPermissionDeniedEndsAtOnce(t *testing.T) {
	cl, _, _ := authPool(t, "viewer", clientv3.PermissionType(clientv3.PermRead))
	ctx := testkit.Ctx(t, 30*time.Second)
	cli := etcdtest.UserClient(t, cl.Endpoints(), "viewer", "pw")
	c := testkit.Coordinator(t, cli)
	s := testkit.Session(t, cli, 10*time.Second)
	for _, tc := range []struct {
		name string
		opts []coordinator.ClaimOption
	}{{"no wait", nil}, {"wait", []coordinator.ClaimOption{coordinator.WithWait()}}} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.Claim(cctx, s, "gpu", tc.opts...)
			if !errors.Is(err, rpctypes.ErrPermissionDenied) {
				t.Fatalf("Claim: %v, want permission denied", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("permission denied took %v to surface", d)
			}
		})
	}
}

// TestFeedDeniedEndsWaiter: a waiter's pool feed re-opens its watch when
// it breaks (here the connection is cut too). If etcd then refuses the
// watch (the claimant's role lost its permission meanwhile), the feed stops
// with that permanent error and the waiting Claim returns it at once,
// rather than retrying forever. It did retry forever: clientv3 passes
// etcd's cancel reason as a plain error (etcdclient.WatchErr).
func TestFeedDeniedEndsWaiter(t *testing.T) {
	cl, root, rc := authPool(t, "claimant", clientv3.PermissionType(clientv3.PermReadWrite))
	ctx := testkit.Ctx(t, 60*time.Second)
	mustClaim(t, ctx, rc, testkit.Session(t, root, 30*time.Second), "gpu")
	prefix := rc.Prefix() + "/pools/"
	p := etcdtest.NewProxy(t, cl.Endpoints()[0])
	cli := etcdtest.UserClient(t, []string{p.URL()}, "claimant", "pw")
	c := testkit.Coordinator(t, cli)
	s := testkit.Session(t, cli, 30*time.Second)
	waited := waitingClaim(ctx, c, s, "gpu")
	waitQueued(t, rc, "gpu", 1)

	if _, err := root.RoleRevokePermission(ctx, "claimant", prefix, clientv3.GetPrefixRangeEnd(prefix)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Restore() // the connection breaks: the client re-opens the feed's watch, if it had not

	select {
	case err := <-waited:
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("waiter whose feed was refused: %v; want permission denied", err)
		}
		t.Logf("the waiter ended %v after the revoke: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter still waits 15 s after etcd refused its pool feed")
	}
}

// authPool starts an etcd with auth on, creates pool "gpu" of one seat as
// root, and adds user (password "pw") holding a role of that name with
// perm on every pool. It returns the cluster, a root client and a root
// Coordinator.
func authPool(t *testing.T, user string, perm clientv3.PermissionType) (*etcdtest.Cluster, *clientv3.Client, *coordinator.Coordinator) {
	t.Helper()
	cl := etcdtest.Start(t)
	root := etcdtest.EnableAuth(t, cl.Client(t))
	rc := testkit.Coordinator(t, root)
	testkit.CreatePool(t, rc, "gpu", coordinator.PoolSpec{Capacity: 1})
	etcdtest.AddPrefixRole(t, root, user, rc.Prefix()+"/pools/", perm)
	etcdtest.AddUser(t, root, user, "pw", user)
	return cl, root, rc
}

// TestWatchRefusedIsLogged: Coordinator.Watch has no error channel, so a
// stream etcd refuses (the user's read permission revoked, the watch
// re-opened) must say so in the log, at warn level, rather than retry in
// silence.
func TestWatchRefusedIsLogged(t *testing.T) {
	cl, root, rc := authPool(t, "viewer", clientv3.PermissionType(clientv3.PermRead))
	ctx := testkit.Ctx(t, 30*time.Second)
	p := etcdtest.NewProxy(t, cl.Endpoints()[0])
	logs := &testkit.SyncBuffer{}
	c := testkit.Coordinator(t, etcdtest.UserClient(t, []string{p.URL()}, "viewer", "pw"),
		coordinator.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	events := c.Watch(ctx, "gpu")
	mustClaim(t, ctx, rc, testkit.Session(t, root, 30*time.Second), "gpu")
	if ev := nextEvent(t, events); ev.Type != coordinator.EventSeatClaimed {
		t.Fatalf("first event %+v; want the claim", ev)
	}

	prefix := rc.Prefix() + "/pools/"
	if _, err := root.RoleRevokePermission(ctx, "viewer", prefix, clientv3.GetPrefixRangeEnd(prefix)); err != nil {
		t.Fatal(err)
	}
	p.Restore() // the watch is re-opened, and refused
	testkit.Eventually(t, 10*time.Second, "the refusal in the log", func() bool {
		return strings.Contains(logs.String(), "level=WARN msg=\"event stream refused; retrying\"") &&
			strings.Contains(logs.String(), "permission denied")
	})
}

// TestReleaseDeniedEndsAtOnce: a holder whose etcd role lost its write
// permission gets the permission error from Release at once, and keeps the
// seat (nothing applied); it did retry until its ctx ended, as if the
// error were a lost connection. Once the permission is back, the release
// goes through.
func TestReleaseDeniedEndsAtOnce(t *testing.T) {
	cl, root, rc := authPool(t, "claimant", clientv3.PermissionType(clientv3.PermReadWrite))
	ctx := testkit.Ctx(t, 60*time.Second)
	cli := etcdtest.UserClient(t, cl.Endpoints(), "claimant", "pw")
	c := testkit.Coordinator(t, cli)
	held := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "gpu")

	prefix, end := rc.Prefix()+"/pools/", clientv3.GetPrefixRangeEnd(rc.Prefix()+"/pools/")
	grant := func(perm clientv3.PermissionType) {
		t.Helper()
		if _, err := root.RoleGrantPermission(ctx, "claimant", prefix, end, perm); err != nil {
			t.Fatal(err)
		}
	}
	grant(clientv3.PermissionType(clientv3.PermRead)) // replaces read-write
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	err := held.Release(rctx)
	if !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("Release: %v, want permission denied", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("permission denied took %v to surface from Release", d)
	}
	seats, err := rc.Seats(ctx, "gpu")
	if err != nil || len(seats) != 1 || seats[0].Token != held.Token() {
		t.Fatalf("after the refused release: seats %+v, %v; want the seat still held under token %d", seats, err, held.Token())
	}

	grant(clientv3.PermissionType(clientv3.PermReadWrite))
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release once the permission is back: %v", err)
	}
}

// TestReleaseDeniedAfterLostAnswerSaysSo: a release whose first answer is
// lost (here the txn applies, the role loses its write permission, and
// the client is told the deadline passed) is retried, and the retry is
// refused. The refusal must end the release at once and say that the
// earlier try may have released the seat (it did), not claim the seat is
// still held.
func TestReleaseDeniedAfterLostAnswerSaysSo(t *testing.T) {
	cl, root, rc := authPool(t, "claimant", clientv3.PermissionType(clientv3.PermReadWrite))
	ctx := testkit.Ctx(t, 60*time.Second)
	prefix := rc.Prefix() + "/pools/"
	var armed atomic.Bool
	ic := func(ictx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ictx, method, req, reply, cc, opts...)
		if _, ok := req.(*pb.TxnRequest); ok && err == nil && armed.CompareAndSwap(true, false) {
			if _, err := root.RoleGrantPermission(ctx, "claimant", prefix, clientv3.GetPrefixRangeEnd(prefix),
				clientv3.PermissionType(clientv3.PermRead)); err != nil {
				t.Error(err)
			}
			return context.DeadlineExceeded // the answer is lost
		}
		return err
	}
	cli := etcdtest.UserClient(t, cl.Endpoints(), "claimant", "pw", grpc.WithChainUnaryInterceptor(ic))
	c := testkit.Coordinator(t, cli)
	held := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "gpu")
	armed.Store(true)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	err := held.Release(rctx)
	if !errors.Is(err, rpctypes.ErrPermissionDenied) || !strings.Contains(err.Error(), "may have released the seat") {
		t.Fatalf("Release: %v; want permission denied, saying the lost try may have released the seat", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("permission denied took %v to surface from Release", d)
	}
	if seats, err := rc.Seats(ctx, "gpu"); err != nil || len(seats) != 0 {
		t.Fatalf("seats %+v, %v; want none: the first try released it", seats, err)
	}
}

// TestReapRefusedWarnsAndRecovers: a claim txn whose answer is lost (here
// it applies, the role loses its write permission, and the client is told
// the deadline passed) cannot be resolved: etcd refuses the fence. The
// claim returns that refusal, and the cleanup goes on in the background
// (reap), where etcd refuses it too. That must be logged as a warning, not
// only retried at debug level; and once the permission is back, the
// cleanup must free the seat the lost txn took, with the session still
// live.
func TestReapRefusedWarnsAndRecovers(t *testing.T) {
	cl, root, rc := authPool(t, "claimant", clientv3.PermissionType(clientv3.PermReadWrite))
	ctx := testkit.Ctx(t, 60*time.Second)
	prefix := rc.Prefix() + "/pools/"
	grant := func(perm clientv3.PermissionType) {
		t.Helper()
		if _, err := root.RoleGrantPermission(ctx, "claimant", prefix, clientv3.GetPrefixRangeEnd(prefix), perm); err != nil {
			t.Error(err)
		}
	}
	var armed atomic.Bool
	ic := func(ictx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ictx, method, req, reply, cc, opts...)
		if r, ok := req.(*pb.TxnRequest); ok && err == nil && writes(r) && armed.CompareAndSwap(true, false) {
			grant(clientv3.PermissionType(clientv3.PermRead)) // replaces read-write
			return context.DeadlineExceeded                   // the answer is lost
		}
		return err
	}
	cli := etcdtest.UserClient(t, cl.Endpoints(), "claimant", "pw", grpc.WithChainUnaryInterceptor(ic))
	logs := &testkit.SyncBuffer{}
	c := testkit.Coordinator(t, cli, coordinator.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	s := testkit.Session(t, cli, 30*time.Second)
	armed.Store(true)
	if _, err := c.Claim(ctx, s, "gpu"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("Claim: %v; want permission denied", err)
	}
	testkit.Eventually(t, 10*time.Second, "a warning that etcd refuses the cleanup", func() bool {
		return strings.Contains(logs.String(), "etcd refuses a cleanup") && strings.Contains(logs.String(), "ambiguous claim")
	})
	if seats, err := rc.Seats(ctx, "gpu"); err != nil || len(seats) != 1 || seats[0].Lease != s.Lease() {
		t.Fatalf("seats %+v, %v; want the one the lost txn took", seats, err)
	}
	grant(clientv3.PermissionType(clientv3.PermReadWrite))
	testkit.Eventually(t, 15*time.Second, "the cleanup to free the seat", func() bool {
		seats, err := rc.Seats(ctx, "gpu")
		return err == nil && len(seats) == 0
	})
	select {
	case <-s.Done():
		t.Fatal("the session ended: the seat went with its lease, not with the cleanup")
	default:
	}
}

// writes reports whether a txn puts a key when its compares hold: a
// claim's, not the read of a pool.
func writes(r *pb.TxnRequest) bool {
	for _, op := range r.Success {
		if op.GetRequestPut() != nil {
			return true
		}
	}
	return false
}

// handoffDeniedRole starts an etcd with auth, creates pool "gpu" of one
// seat as root (rc is root's Coordinator), and returns a client of user
// "holder", whose role may read the pool and write its seats/ and
// released/, but not its queue/: it may claim and release, and etcd
// refuses its hand-offs.
func handoffDeniedRole(t *testing.T) (context.Context, *clientv3.Client, *coordinator.Coordinator, *clientv3.Client) {
	t.Helper()
	cl := etcdtest.Start(t)
	root := etcdtest.EnableAuth(t, cl.Client(t))
	rc := testkit.Coordinator(t, root)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, rc, "gpu", coordinator.PoolSpec{Capacity: 1})
	pool := rc.Prefix() + "/pools/gpu/"
	etcdtest.AddPrefixRole(t, root, "holder", rc.Prefix()+"/pools/", clientv3.PermissionType(clientv3.PermRead))
	for _, seg := range []string{"seats/", "released/"} {
		if _, err := root.RoleGrantPermission(ctx, "holder", pool+seg, clientv3.GetPrefixRangeEnd(pool+seg),
			clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			t.Fatal(err)
		}
	}
	etcdtest.AddUser(t, root, "holder", "pw", "holder")
	return ctx, root, rc, etcdtest.UserClient(t, cl.Endpoints(), "holder", "pw")
}

// TestReleaseRefusedAloneKeepsHandoffs: when etcd refuses the release
// alone too (here the holder's role lost its write on seats/ after the
// claim), the hand-off's refusal says nothing of the hand-off: the release
// fails with etcd's refusal, and the Coordinator does not turn hand-offs
// off for the pool (38e3195 did, on any lasting refusal).
func TestReleaseRefusedAloneKeepsHandoffs(t *testing.T) {
	ctx, root, rc, cli := handoffDeniedRole(t)
	c := testkit.Coordinator(t, cli)
	held := mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "gpu")
	ws := testkit.Session(t, root, 30*time.Second)
	waitingClaim(ctx, rc, ws, "gpu")
	feedShowsWaiter(t, c, "gpu", ws.Lease()) // so the release plans a hand-off
	seats := rc.Prefix() + "/pools/gpu/seats/"
	if _, err := root.RoleRevokePermission(ctx, "holder", seats, clientv3.GetPrefixRangeEnd(seats)); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := held.Release(rctx); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("Release: %v; want etcd's refusal (permission denied)", err)
	}
	if coordinator.HandoffDenied(c, "gpu") {
		t.Fatal("a release that etcd refused alone too turned hand-offs off for the pool")
	}
}

// TestDeniedHandoffReleasesAlone: a release's hand-off writes keys of the
// waiter's (its seat, and the delete of its queue key). A holder whose role
// may write its own seat and release record but not the queue has its
// hand-off refused as permission denied, having applied nothing. The
// release must not end there with the seat held, nor back off as if its
// answer were lost: it goes again alone at once, and the waiter then claims
// the seat itself. The next release on the pool goes alone at once, not
// refused again (for deniedHandoffFor; before, each release paid a refused
// txn and logged a warning).
func TestDeniedHandoffReleasesAlone(t *testing.T) {
	ctx, root, rc, cli := handoffDeniedRole(t)
	refused := make(chan struct{}, 2)
	m := &countingMetrics{}
	c := testkit.Coordinator(t, cli, coordinator.WithMetrics(m), coordinator.WithLogger(signalLogger("refused a hand-off", refused)))
	s := testkit.Session(t, cli, 30*time.Second)
	for round := range 2 {
		held := mustClaim(t, ctx, c, s, "gpu")
		ws := testkit.Session(t, root, 30*time.Second)
		type grant struct {
			cl  *coordinator.Claim
			err error
		}
		granted := make(chan grant, 1)
		go func() {
			cl, err := rc.Claim(ctx, ws, "gpu", coordinator.WithWait())
			granted <- grant{cl, err}
		}()
		feedShowsWaiter(t, c, "gpu", ws.Lease()) // so the release plans a hand-off
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := held.Release(rctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Release: %v; want the seat released alone after its hand-off was refused", round, err)
		}
		select {
		case <-refused:
			if round > 0 {
				t.Fatal("etcd refused the second release's hand-off too: the first refusal was not remembered")
			}
		default:
			if round == 0 {
				t.Fatal("etcd took the hand-off: this test needs a role that refuses it")
			}
		}
		if n := m.releaseRetries.Load(); n != 0 {
			t.Fatalf("round %d: the release retried %d times after etcd refused its hand-off; want it sent again alone at once", round, n)
		}
		g := <-granted
		if g.err != nil {
			t.Fatalf("round %d: the waiter: %v", round, g.err)
		}
		if err := g.cl.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailedFeedNotReused: a pool feed that etcd refused for good (the
// role's permission revoked, the watch re-opened) fails its waiters; once
// the permission is back, a new waiter must wait as usual, not get the old
// refusal from a feed that a holder of the pool still keeps (keepFeed).
// Found by a review (2026-12-04): every later waiter failed at once until
// the holder released.
func TestFailedFeedNotReused(t *testing.T) {
	cl, root, rc := authPool(t, "claimant", clientv3.PermissionType(clientv3.PermReadWrite))
	ctx := testkit.Ctx(t, 60*time.Second)
	pl, err := rc.GetPool(ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	pl.Spec.Capacity = 2
	if _, err := rc.UpdatePool(ctx, "gpu", pl.Spec, pl.Revision); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, ctx, rc, testkit.Session(t, root, 30*time.Second), "gpu")
	p := etcdtest.NewProxy(t, cl.Endpoints()[0])
	cli := etcdtest.UserClient(t, []string{p.URL()}, "claimant", "pw")
	c := testkit.Coordinator(t, cli)
	mustClaim(t, ctx, c, testkit.Session(t, cli, 30*time.Second), "gpu") // keeps the feed
	testkit.Eventually(t, 10*time.Second, "the feed to sync", func() bool { return coordinator.FeedSynced(c, "gpu") })
	s := testkit.Session(t, cli, 30*time.Second)
	refused := waitingClaim(ctx, c, s, "gpu")
	waitQueued(t, rc, "gpu", 1)
	prefix := rc.Prefix() + "/pools/"
	if _, err := root.RoleRevokePermission(ctx, "claimant", prefix, clientv3.GetPrefixRangeEnd(prefix)); err != nil {
		t.Fatal(err)
	}
	p.Restore() // the feed's watch is opened again, and refused
	if err := <-refused; !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("waiter while the permission is revoked: %v; want permission denied", err)
	}
	if _, err := root.RoleGrantPermission(ctx, "claimant", prefix, clientv3.GetPrefixRangeEnd(prefix),
		clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if _, err := c.Claim(wctx, s, "gpu", coordinator.WithWait()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter once the permission is back: %v; want it to wait (the pool is full) until its deadline", err)
	}
}

// unrecordedRole starts an etcd with auth, creates pool "p" with spec as
// root (rc on root), and returns the test's ctx, rc, root, and a
// Coordinator and client of user "old", whose role is the claimant role
// of before waiting/ records: read on the pool, read-write on its seats,
// slots, queue, fences and release records, none on waiting/. Such a
// claimant waits unrecorded (README, Known limits).
func unrecordedRole(t *testing.T, spec coordinator.PoolSpec, opts ...coordinator.Option) (context.Context, *coordinator.Coordinator, *clientv3.Client, *coordinator.Coordinator, *clientv3.Client) {
	t.Helper()
	cl := etcdtest.Start(t)
	root := etcdtest.EnableAuth(t, cl.Client(t))
	rc := testkit.Coordinator(t, root)
	ctx := testkit.Ctx(t, 60*time.Second)
	testkit.CreatePool(t, rc, "p", spec)
	pool := rc.Prefix() + "/pools/p/"
	etcdtest.AddPrefixRole(t, root, "old", pool, clientv3.PermissionType(clientv3.PermRead))
	for _, seg := range []string{"seats/", "binds/", "tenants/", "queue/", "fences/", "released/"} {
		if _, err := root.RoleGrantPermission(ctx, "old", pool+seg, clientv3.GetPrefixRangeEnd(pool+seg),
			clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
			t.Fatal(err)
		}
	}
	etcdtest.AddUser(t, root, "old", "pw", "old")
	uc := etcdtest.UserClient(t, cl.Endpoints(), "old", "pw")
	return ctx, rc, root, testkit.Coordinator(t, uc, opts...), uc
}

// TestUnrecordedWaiterJoins: a waiter held back by its tenant's limit,
// whose role may not write waiting/, is granted once its tenant has room.
// Found by a review (2026-12-04): its enqueue carried the delete of the
// record etcd had refused to write, was refused too, and the claim failed
// with permission denied.
func TestUnrecordedWaiterJoins(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	ctx, rc, root, uc, ucli := unrecordedRole(t, coordinator.PoolSpec{Capacity: 2, TenantLimit: 1},
		coordinator.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	held := mustClaim(t, ctx, rc, testkit.Session(t, root, 30*time.Second), "p", coordinator.WithTenant("a"))
	granted := waitingClaim(ctx, uc, testkit.Session(t, ucli, 30*time.Second), "p", coordinator.WithTenant("a"))
	testkit.Eventually(t, 10*time.Second, "the held-back waiter's record refused", func() bool {
		return strings.Contains(logs.String(), "it waits unrecorded")
	})
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("the unrecorded waiter, once its tenant had room: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the unrecorded waiter not granted 10 s after its tenant's seat freed")
	}
}

// TestUnrecordedHeadGrantedKeepsSeat: TestGrantedAsHeadStepsOutKeepsSeat
// for a head whose role may not write waiting/: its step-out goes
// unrecorded, and a seat a hand-off granted it meanwhile is kept. Found by
// a review (2026-12-04): the step-out txn was refused, and the waiter
// left as one that gives up, releasing the seat.
func TestUnrecordedHeadGrantedKeepsSeat(t *testing.T) {
	ctx, rc, root, uc, ucli := unrecordedRole(t, coordinator.PoolSpec{Capacity: 2, TenantLimit: 1})
	grantedAsHeadKeepsSeat(t, ctx, rc, root, uc, ucli)
}
