package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestSidecarSaysWhyItWaits: a sidecar held back by its tenant's limit
// says so on /startupz, on /seat and in its log (at once and again while
// it waits), and its wait timeout names the reason, not a bare context
// error.
func TestSidecarSaysWhyItWaits(t *testing.T) {
	_, cli, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2, TenantLimit: 1})
	holder := testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "p", coordinator.WithTenant("a"))
	defer func() { _ = holder.Release(ctx) }()
	cfg := sidecarConfig(t)
	cfg.Tenant, cfg.WaitTimeout = "a", config.Duration(3*time.Second)
	logs := &testkit.SyncBuffer{}
	sc := NewSidecar(co, cfg, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	sc.waitLogEvery = 200 * time.Millisecond
	srv := httptest.NewServer(sc.Handler(nil))
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	const why = `tenant at limit: tenant "a" holds 1 of its limit 1`
	testkit.Eventually(t, 5*time.Second, "/startupz says why", func() bool {
		code, body := getBody(t, srv.URL+StartupzPath)
		return code == 503 && strings.Contains(body, "seat waiting: "+why)
	})
	_, body := getBody(t, srv.URL+SeatPath)
	var v struct {
		State   string                  `json:"state"`
		Waiting *coordinator.WaitStatus `json:"waiting"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.State != StateWaiting || v.Waiting == nil ||
		v.Waiting.Reason != coordinator.WaitTenantLimit || v.Waiting.InLine {
		t.Fatalf("/seat = %s (%v); want state waiting, held back for tenant_limit", body, err)
	}
	testkit.Eventually(t, 5*time.Second, "the reason repeated in the log", func() bool {
		l := logs.String()
		return strings.Contains(l, `msg="waiting for a seat"`) && strings.Contains(l, "reason=tenant_limit") &&
			strings.Contains(l, `msg="still waiting for a seat"`)
	})
	err := <-done
	if !errors.Is(err, ErrWaitTimeout) || !strings.Contains(err.Error(), "still waiting: "+why) || strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("Run = %v; want ErrWaitTimeout naming %q", err, why)
	}
}

// TestSidecarDeniedTenantFailsAtOnce: a tenant whose limit is 0 can never
// be granted: the sidecar fails at once, saying so, even with no wait
// timeout.
func TestSidecarDeniedTenantFailsAtOnce(t *testing.T) {
	_, _, co := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2, TenantLimits: map[string]int{"x": 0}})
	cfg := sidecarConfig(t)
	cfg.Tenant = "x"
	sc := NewSidecar(co, cfg)
	start := time.Now()
	err := sc.Run(ctx)
	var ns *coordinator.NoSeatError
	if !errors.As(err, &ns) || ns.Reason != coordinator.WaitTenantDenied || !strings.Contains(err.Error(), `tenant "x" is denied`) || time.Since(start) > 5*time.Second {
		t.Fatalf("Run = %v after %v; want tenant_denied at once", err, time.Since(start))
	}
	if rec := sc.Record(); rec.State != StateFailed || !strings.Contains(rec.Error, "denied") {
		t.Fatalf("record %+v; want failed, saying denied", rec)
	}
}
