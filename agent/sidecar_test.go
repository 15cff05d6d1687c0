package agent

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
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
	if _, err := co.CreatePool(ctx, "p", coordinator.PoolSpec{Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	sc := NewSidecar(co, sidecarConfig(t))
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sc.Run(rctx) }()
	waitFor(t, 5*time.Second, "held", sc.Held)
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
	if _, err := co.CreatePool(ctx, "p", coordinator.PoolSpec{Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	sess, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	if _, err := co.Claim(ctx, sess, "p"); err != nil {
		t.Fatal(err)
	}
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
