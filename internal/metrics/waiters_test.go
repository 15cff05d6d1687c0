package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestWaitersGauge checks etcdpool_waiters{pool,reason} on real claims:
// a claim held back by its tenant's limit counts under tenant_limit, one
// in line behind it under pool_full (the head), and both go when they
// stop waiting.
func TestWaitersGauge(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	c := etcdtest.Start(t)
	cli := c.Client(t)
	reg := prometheus.NewRegistry()
	co := testkit.Coordinator(t, cli, coordinator.WithMetrics(New(reg)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1, TenantLimit: 1})
	sess := testkit.Session(t, cli, 5*time.Second)
	testkit.Claim(t, co, sess, "p", coordinator.WithTenant("a"))
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	for _, tenant := range []string{"a", "b"} {
		go func() {
			_, _ = co.Claim(wctx, sess, "p", coordinator.WithWait(), coordinator.WithTenant(tenant))
			done <- struct{}{}
		}()
	}
	want := map[string]float64{
		`etcdpool_waiters{pool="p",reason="tenant_limit"}`: 1,
		`etcdpool_waiters{pool="p",reason="pool_full"}`:    1,
	}
	testkit.Eventually(t, 10*time.Second, "both waiters counted by reason", func() bool {
		got := gather(t, reg)
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	})
	stop()
	<-done
	<-done
	for k := range want {
		if v := gather(t, reg)[k]; v != 0 {
			t.Errorf("%s = %v after both left, want 0", k, v)
		}
	}
}
