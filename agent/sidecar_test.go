package agent

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/agent/agenttest"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
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
	agenttest.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	sc := NewSidecar(co, sidecarConfig(t))
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sc.Run(rctx) }()
	agenttest.Eventually(t, 5*time.Second, "held", sc.Held)
	for _, p := range []string{StartupzPath, ReadyzPath, HealthzPath, SeatPath} {
		if code := get(t, srv.URL+p); code != 200 {
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
	if code := get(t, srv.URL+ReadyzPath); code != 503 {
		t.Errorf("/readyz = %d after release, want 503", code)
	}
}

func TestSidecarWaitTimeout(t *testing.T) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	agenttest.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	agenttest.Claim(t, co, agenttest.Session(t, cli, 2*time.Second), "p")
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
	agenttest.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	holder := agenttest.Claim(t, co, agenttest.Session(t, cli, 2*time.Second), "p", coordinator.WithHolder("holder"))
	cfg := sidecarConfig(t)
	cfg.WaitTimeout = config.Duration(20 * time.Second)
	var lost atomic.Int32
	sc := NewSidecar(co, cfg, WithSessionLostHook(func() { lost.Add(1) }))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sc.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	}()

	first := agenttest.QueuedLease(t, co, "p", 0)
	etcdtest.Revoke(t, cli, first)
	second := agenttest.QueuedLease(t, co, "p", first)
	if lost.Load() != 1 {
		t.Errorf("session-lost hook called %d times, want 1", lost.Load())
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	agenttest.Eventually(t, 10*time.Second, "seat held by the sidecar", sc.Held)
	seats, err := co.Seats(ctx, "p")
	if err != nil || len(seats) != 1 || seats[0].Holder != "test" || seats[0].Lease != second {
		t.Fatalf("seats %+v, %v; want one held by the sidecar under lease %x", seats, err, second)
	}
	if rec := sc.Record(); rec.Lease != leaseHex(second) || rec.Token != seats[0].Token {
		t.Errorf("record %+v does not match the seat %+v", rec, seats[0])
	}
}
