package agent

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// On SIGTERM the sidecar tells its app (/readyz, the seat file, its
// record) before it releases the seat: a waiter granted the seat must find
// this pod no longer saying held. Found by a review (2026-12-05): the seat
// was released first, and the waiter was granted it while this pod still
// said held (5 of 5 runs).
func TestSidecarSigtermTellsAppBeforeRelease(t *testing.T) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	cfg := sidecarConfig(t)
	sc, url, stop, done := heldSidecar(t, ctx, co, cfg)
	wsess := testkit.Session(t, cli, 5*time.Second)
	type snap struct {
		state, file string
		code        int
	}
	got := make(chan snap, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl, err := co.Claim(ctx, wsess, "p", coordinator.WithWait(), coordinator.WithHolder("other"))
		if err != nil {
			t.Errorf("waiter: %v", err)
			got <- snap{}
			return
		}
		// The moment the other pod has the seat: what does our app see?
		st := sc.Record().State
		rec, _ := ReadSeatFile(cfg.SeatFile)
		code := get(t, url+ReadyzPath)
		got <- snap{st, rec.State, code}
		_ = cl.Release(ctx)
	}()
	testkit.Eventually(t, 5*time.Second, "the waiter to queue", func() bool {
		q, err := co.Queue(ctx, "p")
		return err == nil && len(q) == 1
	})
	stop()
	s := <-got
	wg.Wait()
	<-done
	t.Logf("at the waiter's grant: record=%s seatfile=%s /readyz=%d", s.state, s.file, s.code)
	if s.state == StateHeld || s.file == StateHeld {
		t.Errorf("seat granted to another claimant while this sidecar still says held: record %q, seat file %q", s.state, s.file)
	}
}

// A sidecar restarted (a crash, the kubelet) during its hold after its
// instance went adopts the seat, which is still held, but never says held
// again for the gone instance. Found by a review (2026-12-05): it did for
// about 80 ms, /readyz answering 200 some 50 times, until the claim's
// monitor reported the loss.
func TestSidecarRestartDuringInstanceGoneHold(t *testing.T) {
	ctx, cli, co, agent := poolWithBot(t)
	cfg := sidecarConfig(t)
	cfg.TTL, cfg.AppStopWithin, cfg.Instance = config.Duration(4*time.Second), config.Duration(1500*time.Millisecond), "bot-1"
	// The previous run: held the seat bound to bot-1, then crashed.
	sess := testkit.Session(t, cli, 4*time.Second)
	cl := testkit.Claim(t, co, sess, "p", coordinator.WithHolder("test"), coordinator.WithInstance("bot-1"))
	sess.Orphan()
	st := resumeState{Pool: "p", Lease: int64(sess.Lease()), State: StateHeld, Seat: cl.Seat(), Token: cl.Token()}
	b, _ := json.Marshal(st)
	if err := WriteFileAtomic(StatePath(cfg.SeatFile), b, stateFileMode); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, agent.Lease()); err != nil { // the instance goes with it, by the time Revoke returns
		t.Fatal(err)
	}
	sc := NewSidecar(co, cfg)
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	var mu sync.Mutex
	var sawHeld, sawFileHeld bool
	var first, last time.Time
	var ok200 int
	pctx, pstop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pctx.Err() == nil {
			h := sc.Held()
			r, _ := ReadSeatFile(cfg.SeatFile)
			mu.Lock()
			sawHeld = sawHeld || h
			sawFileHeld = sawFileHeld || r.State == StateHeld
			if h {
				if first.IsZero() {
					first = time.Now()
				}
				last = time.Now()
			}
			mu.Unlock()
			if h && get(t, srv.URL+ReadyzPath) == 200 {
				ok200++
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	err := sc.Run(ctx)
	pstop()
	wg.Wait()
	if sawHeld || sawFileHeld {
		t.Errorf("restarted sidecar said held for a seat whose instance is gone (record %v, file %v), for %v; /readyz answered 200 %d times; Run = %v",
			sawHeld, sawFileHeld, last.Sub(first), ok200, err)
	}
}

// A SIGTERM during the hold after the instance's loss does not free the
// seat, and the instance's slot, before AppStopWithin has passed since
// /readyz failed: the app may still be stopping. Found by a review
// (2026-12-05): they were freed 6 ms after /readyz failed.
func TestSidecarSigtermKeepsInstanceGoneHold(t *testing.T) {
	ctx, cli, co, agent := poolWithBot(t)
	cfg := sidecarConfig(t)
	cfg.TTL, cfg.AppStopWithin, cfg.Instance = config.Duration(4*time.Second), config.Duration(1500*time.Millisecond), "bot-1"
	_, url, stop, done := heldSidecar(t, ctx, co, cfg)
	if _, err := cli.Revoke(ctx, agent.Lease()); err != nil {
		t.Fatal(err)
	}
	// failed is when the test saw /readyz fail: up to a poll after it did.
	testkit.Eventually(t, 5*time.Second, "/readyz failing", func() bool { return get(t, url+ReadyzPath) == 503 })
	failed := time.Now()
	stop()
	<-done
	seats, _ := co.Seats(ctx, "p")
	const poll = 100 * time.Millisecond
	if took := time.Since(failed); len(seats) == 0 && took < cfg.AppStopWithin.D()-poll {
		t.Errorf("seat freed %v after /readyz failed, before appStopWithin %v", took, cfg.AppStopWithin)
	}
}

// heldSidecar runs a sidecar of cfg on co, with its HTTP handler served,
// until it holds its seat. stop is its SIGTERM; done says how Run ended.
func heldSidecar(t *testing.T, ctx context.Context, co *coordinator.Coordinator, cfg config.Sidecar) (sc *Sidecar, url string, stop func(), done <-chan error) {
	t.Helper()
	sc = NewSidecar(co, cfg)
	srv := httptest.NewServer(sc.Handler(nil))
	t.Cleanup(srv.Close)
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	ended := make(chan error, 1)
	go func() { ended <- sc.Run(rctx) }()
	testkit.Eventually(t, 5*time.Second, "held", sc.Held)
	return sc, srv.URL, stop, ended
}
