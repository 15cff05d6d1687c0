package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func sidecarConfig(t *testing.T) config.Sidecar {
	cfg := config.Default().Sidecar
	cfg.Pool, cfg.Holder, cfg.TTL = "p", "test", config.Duration(2*time.Second)
	cfg.SeatFile = filepath.Join(t.TempDir(), "seat.json")
	cfg.LossGrace = config.Duration(100 * time.Millisecond)
	return cfg
}

func TestSidecarReleasesOnCancel(t *testing.T) {
	_, _, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	_, url, stop, done := heldSidecar(t, ctx, co, cfg)
	for _, p := range []string{StartupzPath, ReadyzPath, HealthzPath, SeatPath} {
		if code := get(t, url+p); code != 200 {
			t.Errorf("%s = %d while held", p, code)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if s, err := co.Seats(ctx, "p"); err != nil || len(s) != 0 {
		t.Errorf("seats after release: %v, %v", s, err)
	}
	if code := get(t, url+ReadyzPath); code != 503 {
		t.Errorf("/readyz = %d after release, want 503", code)
	}
	if _, err := os.Stat(StatePath(cfg.SeatFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resume state after release: %v, want none", err)
	}
}

func TestSidecarWaitTimeout(t *testing.T) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p")
	cfg := sidecarConfig(t)
	cfg.WaitTimeout = config.Duration(300 * time.Millisecond)
	sc := NewSidecar(co, cfg)
	if err := sc.Run(ctx); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("Run on a full pool = %v, want ErrWaitTimeout", err)
	}
	rec, err := ReadSeatFile(cfg.SeatFile)
	if err != nil || rec.State != StateFailed {
		t.Fatalf("seat file %+v, %v; want state failed", rec, err)
	}
	if q, _ := co.Queue(ctx, "p"); len(q) != 0 {
		t.Errorf("queue entry left behind: %+v", q)
	}
}

// TestSidecarQueuesAgainAfterSessionLostWhileWaiting revokes the lease of
// a sidecar queued behind a holder: the sidecar must queue again under a
// new lease, and get the seat when the holder releases it.
func TestSidecarQueuesAgainAfterSessionLostWhileWaiting(t *testing.T) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	holder := testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithHolder("holder"))
	cfg := sidecarConfig(t)
	cfg.WaitTimeout = config.Duration(20 * time.Second)
	var lost atomic.Int32
	sc := NewSidecar(co, cfg, WithSessionLostHook(func() { lost.Add(1) }))
	runSidecar(t, sc)

	first := testkit.QueuedLease(t, co, "p", 0)
	etcdtest.Revoke(t, cli, first)
	second := testkit.QueuedLease(t, co, "p", first)
	if lost.Load() != 1 {
		t.Errorf("session-lost hook called %d times, want 1", lost.Load())
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "seat held by the sidecar", sc.Held)
	seats, err := co.Seats(ctx, "p")
	if err != nil || len(seats) != 1 || seats[0].Holder != "test" || seats[0].Lease != second {
		t.Fatalf("seats %+v, %v; want one held by the sidecar under lease %x", seats, err, second)
	}
	if rec := sc.Record(); rec.Lease != leaseHex(second) || rec.Token != seats[0].Token {
		t.Errorf("record %+v does not match the seat %+v", rec, seats[0])
	}
}

// crashedRun leaves what a sidecar killed with SIGKILL leaves: a claim of
// pool p under a lease of ttl that nobody keeps alive, and a resume state
// saying state. It returns the claim.
func crashedRun(t *testing.T, cli *clientv3.Client, co *coordinator.Coordinator, cfg config.Sidecar, ttl time.Duration, state string) *coordinator.Claim {
	t.Helper()
	sess := testkit.Session(t, cli, ttl)
	cl := testkit.Claim(t, co, sess, "p", coordinator.WithHolder("test"))
	sess.Orphan()
	st := resumeState{Pool: "p", Lease: int64(sess.Lease()), State: state, Seat: -1}
	if state == StateHeld {
		st.Seat, st.Token = cl.Seat(), cl.Token()
	}
	b, _ := json.Marshal(st)
	if err := WriteFileAtomic(StatePath(cfg.SeatFile), b, stateFileMode); err != nil {
		t.Fatal(err)
	}
	return cl
}

// runSidecar runs sc until the test ends, then stops it and checks that
// Run returned nil.
func runSidecar(t *testing.T, sc *Sidecar) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	})
}

// TestSidecarResumesHeldSeat: a restart within the TTL keeps the seat, the
// token and the lease; the state file is private and goes with the release.
func TestSidecarResumesHeldSeat(t *testing.T) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	old := crashedRun(t, cli, co, cfg, 2*time.Second, StateHeld)
	sc := NewSidecar(co, cfg)
	runSidecar(t, sc)
	testkit.Eventually(t, 5*time.Second, "held", sc.Held)
	rec := sc.Record()
	if rec.Seat != old.Seat() || rec.Token != old.Token() || rec.Lease != leaseHex(old.Lease()) {
		t.Fatalf("resumed record %+v, want seat %d token %d lease %x", rec, old.Seat(), old.Token(), old.Lease())
	}
	// Past the old lease's TTL the seat is still the same one.
	testkit.Consistently(t, 3*time.Second, "seat kept", func() bool {
		ss, err := co.Seats(ctx, "p")
		return err == nil && len(ss) == 1 && ss[0].Token == old.Token() && sc.Held()
	})
	fi, err := os.Stat(StatePath(cfg.SeatFile))
	if err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("state file %v, %v: want it private", fi, err)
	}
}

// TestSidecarRevokesWhatAWaitingRunLeft: the previous run crashed after its
// seat was granted but before it recorded the grant. Its lease (TTL 30 s)
// is revoked at once, which frees that seat, and the sidecar claims afresh
// instead of waiting 30 s for it to expire.
func TestSidecarRevokesWhatAWaitingRunLeft(t *testing.T) {
	testSidecarClaimsAfresh(t, StateWaiting, 30*time.Second, nil, nil)
}

// TestSidecarClaimsAfreshWhenSeatGone: the seat of the previous run was
// force-released while the sidecar was down: the resume is refused by the
// token and the sidecar revokes the old lease and claims afresh.
func TestSidecarClaimsAfreshWhenSeatGone(t *testing.T) {
	testSidecarClaimsAfresh(t, StateHeld, 30*time.Second, nil, func(ctx context.Context, co *coordinator.Coordinator, old *coordinator.Claim) error {
		_, err := co.ForceRelease(ctx, "p", old.Seat(), old.Token(), "test")
		return err
	})
}

// TestSidecarClaimsAfreshWhenLeaseTooShortForAppStop: the previous run's
// lease (TTL 2 s) cannot keep a sidecar.appStopWithin of 1.5 s, which the
// new configuration (TTL 4 s) allows: resumed, its /readyz would fail
// while keepalives are answered, and the kubelet would stop the app again
// and again. The sidecar claims afresh instead. Found by a review: before
// the fix it resumed, and /readyz failed in every probe.
func TestSidecarClaimsAfreshWhenLeaseTooShortForAppStop(t *testing.T) {
	testSidecarClaimsAfresh(t, StateHeld, 2*time.Second, func(cfg *config.Sidecar) {
		cfg.TTL, cfg.AppStopWithin = config.Duration(4*time.Second), config.Duration(1500*time.Millisecond)
	}, nil)
}

// testSidecarClaimsAfresh: what a previous run that crashed in state, under a
// lease of oldTTL, left is revoked, and the sidecar, configured by edit,
// claims afresh and holds the seat with /readyz passing.
func testSidecarClaimsAfresh(t *testing.T, state string, oldTTL time.Duration, edit func(*config.Sidecar), meanwhile func(context.Context, *coordinator.Coordinator, *coordinator.Claim) error) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	old := crashedRun(t, cli, co, cfg, oldTTL, state)
	if edit != nil {
		edit(&cfg)
	}
	if meanwhile != nil {
		if err := meanwhile(ctx, co, old); err != nil {
			t.Fatal(err)
		}
	}
	sc := NewSidecar(co, cfg)
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	runSidecar(t, sc)
	testkit.Eventually(t, 10*time.Second, "held", sc.Held)
	testkit.Consistently(t, cfg.TTL.D(), "/readyz passing", func() bool { return get(t, srv.URL+ReadyzPath) == 200 })
	if rec := sc.Record(); rec.Token == old.Token() || rec.Lease == leaseHex(old.Lease()) {
		t.Errorf("record %+v: want a fresh claim, not token %d lease %x", rec, old.Token(), old.Lease())
	}
	if ttl, err := cli.TimeToLive(ctx, old.Lease()); err != nil || ttl.TTL != -1 {
		t.Errorf("old lease TTL %v, %v: want it revoked", ttl, err)
	}
	st, ok := sc.loadState()
	if !ok || st.State != StateHeld || st.Token != sc.Record().Token {
		t.Errorf("state %+v (%v) after the fresh claim", st, ok)
	}
}

// TestSidecarHoldsGoneInstanceUntilAppStopped: the instance the sidecar's
// seat is bound to goes (its agent cut off from etcd past its lease, say).
// /readyz fails at once, and the seat, with the instance's slot, stays
// held for sidecar.appStopWithin, the time the app may take to stop, so
// that the instance cannot be bound again meanwhile; then the sidecar
// frees it. Before 2026-12-05 the seat went as the loss was seen.
func TestSidecarHoldsGoneInstanceUntilAppStopped(t *testing.T) {
	ctx, cli, co, agent := poolWithBot(t)
	events := co.Watch(ctx, "p")
	cfg := sidecarConfig(t)
	cfg.TTL, cfg.AppStopWithin, cfg.Instance = config.Duration(4*time.Second), config.Duration(1500*time.Millisecond), "bot-1"
	sc := NewSidecar(co, cfg)
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	testkit.Eventually(t, 5*time.Second, "held", sc.Held)
	token := sc.Record().Token
	if _, err := cli.Revoke(ctx, agent.Lease()); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "/readyz failing", func() bool { return get(t, srv.URL+ReadyzPath) == 503 })
	failed := time.Now()
	held := func() bool {
		seats, err := co.Seats(ctx, "p")
		return err == nil && len(seats) == 1 && seats[0].Token == token
	}
	testkit.Consistently(t, cfg.AppStopWithin.D()-200*time.Millisecond, "the seat held while the app stops", held)
	select {
	case err := <-done:
		if !errors.Is(err, ErrSeatLost) || !errors.Is(err, coordinator.ErrInstanceGone) {
			t.Fatalf("Run = %v, want ErrSeatLost for ErrInstanceGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the loss")
	}
	if held() {
		t.Error("seat still held after Run returned")
	}
	// Freed by a release recording the instance's loss, not by the
	// session's revoke, which the pool's events would call an expiry.
	for ev := range events {
		if ev.Type != coordinator.EventSeatClaimed && ev.Seat >= 0 {
			if ev.LossReason() != coordinator.ReasonInstanceGone {
				t.Errorf("the seat's end: event %s, loss reason %q; want %q", ev.Type, ev.LossReason(), coordinator.ReasonInstanceGone)
			}
			break
		}
	}
	t.Logf("seat freed %v after /readyz failed (appStopWithin %v)", time.Since(failed), cfg.AppStopWithin)
}

// TestSidecarSaysDraining: the instance of the sidecar's seat starts
// draining; the seat file says so (draining: true, and in the env file),
// and the probes keep passing while the seat is held. Made ready again,
// the seat file says draining: false (before 2026-12-05 it kept true).
func TestSidecarSaysDraining(t *testing.T) {
	ctx, _, co, _ := poolWithBot(t)
	cfg := sidecarConfig(t)
	sc := NewSidecar(co, cfg)
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	runSidecar(t, sc)
	testkit.Eventually(t, 5*time.Second, "held", sc.Held)
	if _, err := co.SetInstanceState(ctx, "p", "bot-1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	// The env file is written after the JSON one: wait for both.
	testkit.Eventually(t, 5*time.Second, "the seat file and the env file to say draining", func() bool {
		b, err := os.ReadFile(cfg.SeatFile)
		var rec SeatRecord
		env, eerr := os.ReadFile(cfg.EnvPath())
		return err == nil && json.Unmarshal(b, &rec) == nil && rec.Draining && rec.State == StateHeld &&
			eerr == nil && strings.Contains(string(env), "ETCDPOOL_SEAT_DRAINING='true'")
	})
	if code := get(t, srv.URL+ReadyzPath); code != 200 {
		t.Errorf("/readyz = %d while the seat is held on a draining instance, want 200", code)
	}
	// Undrained (poolctl undrain): the seat file says so again.
	if _, err := co.SetInstanceState(ctx, "p", "bot-1", coordinator.InstanceReady); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the seat file and the env file to say no longer draining", func() bool {
		b, err := os.ReadFile(cfg.SeatFile)
		var rec SeatRecord
		env, eerr := os.ReadFile(cfg.EnvPath())
		return err == nil && json.Unmarshal(b, &rec) == nil && !rec.Draining && rec.State == StateHeld &&
			eerr == nil && strings.Contains(string(env), "ETCDPOOL_SEAT_DRAINING='false'")
	})
}

// TestSidecarResumedOnDrainingInstance: the previous run held a seat on
// bot-1, and bot-1 started draining while the sidecar was down. The
// resumed sidecar's seat file says draining. The claim's monitor runs from
// the resume on, and may see the drain before the sidecar first asks
// (here it does: the "seat held" log line takes 300 ms). Found by a
// review (2026-12-05): the sidecar dropped DrainState's first answer, so
// the seat file never said draining.
func TestSidecarResumedOnDrainingInstance(t *testing.T) {
	ctx, cli, co, _ := poolWithBot(t)
	cfg := sidecarConfig(t)
	old := crashedRun(t, cli, co, cfg, 2*time.Second, StateHeld)
	if _, err := co.SetInstanceState(ctx, "p", "bot-1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	slow := slog.New(slowLine{slog.NewTextHandler(io.Discard, nil), "seat held", 300 * time.Millisecond})
	sc := NewSidecar(co, cfg, WithLogger(slow))
	runSidecar(t, sc)
	testkit.Eventually(t, 5*time.Second, "the resumed seat's file to say draining", func() bool {
		rec, err := ReadSeatFile(cfg.SeatFile)
		return err == nil && rec.State == StateHeld && rec.Token == old.Token() && rec.Draining
	})
}

// slowLine is a slog.Handler that takes d to handle a record whose message
// is msg.
type slowLine struct {
	slog.Handler
	msg string
	d   time.Duration
}

func (h slowLine) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		time.Sleep(h.d)
	}
	return h.Handler.Handle(ctx, r)
}

func (h slowLine) WithAttrs(as []slog.Attr) slog.Handler {
	return slowLine{h.Handler.WithAttrs(as), h.msg, h.d}
}

func (h slowLine) WithGroup(name string) slog.Handler {
	return slowLine{h.Handler.WithGroup(name), h.msg, h.d}
}

// poolWithBot makes pool p, capacity 2, with instance bot-1 registered by
// an agent whose session it returns, and a context for the test.
func poolWithBot(t *testing.T) (context.Context, *clientv3.Client, *coordinator.Coordinator, *coordinator.Session) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	agent := testkit.Session(t, cli, 10*time.Second)
	if _, err := co.RegisterInstance(ctx, "p", agent.Lease(), coordinator.Instance{ID: "bot-1", Addr: "10.0.0.1:80"}); err != nil {
		t.Fatal(err)
	}
	return ctx, cli, co, agent
}

// TestSidecarFailedResumeTellsAppFirst: a sidecar crashed holding the only
// seat (its seat file says held; its app may run) and is restarted with a
// configuration that makes it claim afresh (the lease's TTL now too short
// for appStopWithin), while a waiter queues. When the waiter is granted the
// seat, this pod's seat file must no longer say held, and the seat must
// have stayed held appStopWithin after the file said lost. Found by a
// review (2026-12-05): the old lease was revoked first, and the waiter got
// the seat at once while the file still said held.
func TestSidecarFailedResumeTellsAppFirst(t *testing.T) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	old := crashedRun(t, cli, co, cfg, 2*time.Second, StateHeld)
	file := SeatFile{JSONPath: cfg.SeatFile, EnvPath: cfg.EnvPath()}
	if err := file.Write(SeatRecord{State: StateHeld, Pool: "p", Seat: old.Seat(), Token: old.Token(), Lease: leaseHex(old.Lease())}); err != nil {
		t.Fatal(err)
	}
	wco := testkit.Coordinator(t, testkit.Client(t, cli.Endpoints()...))
	type res struct {
		rec SeatRecord
		at  time.Time
		err error
	}
	granted := make(chan res, 1)
	go func() {
		_, err := wco.Claim(ctx, testkit.Session(t, cli, 5*time.Second), "p", coordinator.WithWait(), coordinator.WithHolder("waiter"))
		at := time.Now()
		rec, rerr := ReadSeatFile(cfg.SeatFile)
		granted <- res{rec, at, errors.Join(err, rerr)}
	}()
	testkit.Eventually(t, 5*time.Second, "the waiter queued", func() bool {
		q, err := co.Queue(ctx, "p")
		return err == nil && len(q) == 1
	})
	cfg.TTL, cfg.AppStopWithin = config.Duration(4*time.Second), config.Duration(1500*time.Millisecond)
	started := time.Now()
	runSidecar(t, NewSidecar(co, cfg))
	r := <-granted
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rec.State == StateHeld && r.rec.Token == old.Token() {
		t.Errorf("the waiter was granted the seat while this pod's seat file still said %q with token %d", r.rec.State, r.rec.Token)
	}
	if took := r.at.Sub(started); took < cfg.AppStopWithin.D() {
		t.Errorf("the waiter was granted the seat %v after the restart, before appStopWithin %v", took, cfg.AppStopWithin)
	}
}

// TestSidecarResumeRefusedForGoodGivesUp: a restarted sidecar whose user
// may no longer read its pool cannot adopt its seat. The refusal is for
// good: it must give up the resume at once, not retry it silently for a
// whole TTL, and then fail its fresh claim with that refusal. Found by a
// review (2026-12-05): the resume retried it for the TTL.
func TestSidecarResumeRefusedForGoodGivesUp(t *testing.T) {
	c, cli, _ := setup(t)
	root := etcdtest.EnableAuth(t, cli)
	rco := testkit.Coordinator(t, root)
	testkit.CreatePool(t, rco, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	cfg.TTL = config.Duration(8 * time.Second)
	crashedRun(t, root, rco, cfg, cfg.TTL.D(), StateHeld)
	etcdtest.AddPrefixRole(t, root, "none", "/nothing/", clientv3.PermissionType(clientv3.PermRead))
	etcdtest.AddUser(t, root, "sidecar", "pw", "none") // may read nothing of the pool
	sco := testkit.Coordinator(t, etcdtest.UserClient(t, c.Endpoints(), "sidecar", "pw"))
	start := time.Now()
	err := NewSidecar(sco, cfg).Run(context.Background())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Run: %v; want the permission refusal", err)
	}
	if took > cfg.TTL.D()/2 {
		t.Errorf("Run gave up %v after its start, retrying a refusal for good for most of the TTL (%v)", took.Round(time.Millisecond), cfg.TTL)
	}
}

// TestSidecarFailedResumeSIGTERMEndsGrace: a restarted sidecar that cannot
// resume its seat keeps the old lease alive while its app stops, as after
// a loss: the loss grace, then AppStopWithin from the seat file's "lost".
// A SIGTERM ends the loss grace, as it does after a loss (lose), so the
// pod stops within AppStopWithin, not a loss grace later. Found by a
// review (2026-12-05): the wait was the longer of the two, whatever came.
func TestSidecarFailedResumeSIGTERMEndsGrace(t *testing.T) {
	_, cli, co := setup(t)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	old := crashedRun(t, cli, co, cfg, 2*time.Second, StateHeld)
	// A TTL other than the lease's: the resume fails (leaseFits) with the
	// old lease resumed and the seat still on it.
	cfg.TTL, cfg.AppStopWithin, cfg.LossGrace = config.Duration(4*time.Second), config.Duration(1500*time.Millisecond), config.Duration(20*time.Second)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- NewSidecar(co, cfg).Run(ctx) }()
	testkit.Eventually(t, 10*time.Second, "the seat file to say lost", func() bool {
		rec, err := ReadSeatFile(cfg.SeatFile)
		return err == nil && rec.State == StateLost && rec.Token == old.Token()
	})
	stop() // SIGTERM
	stopped := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after SIGTERM: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("5 s after SIGTERM the sidecar still waits; AppStopWithin is %v, the loss grace %v", cfg.AppStopWithin, cfg.LossGrace)
	}
	t.Logf("Run returned %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))
}
