package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// counter reads a counter's value.
func counter(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// gather returns every series of reg (see testkit.Series).
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return testkit.Series(fams)
}

// TestLibraryHook checks the Prometheus implementation of
// coordinator.Metrics on real claims against a real etcd.
func TestLibraryHook(t *testing.T) {
	// Registered first, so it runs last: after etcd and the client stop.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	c := etcdtest.Start(t)
	cli := c.Client(t)
	reg := prometheus.NewRegistry()
	m := New(reg)
	co := testkit.Coordinator(t, cli, coordinator.WithMetrics(m))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	sess := testkit.Session(t, cli, 2*time.Second)
	cl := testkit.Claim(t, co, sess, "p")
	if _, err := co.Claim(ctx, sess, "p"); !errors.Is(err, coordinator.ErrNoSeat) {
		t.Fatalf("second claim: %v, want ErrNoSeat", err)
	}
	done := cl.Done()
	if _, err := co.ForceRelease(ctx, "p", cl.Seat(), cl.Token(), "test"); err != nil {
		t.Fatal(err)
	}
	<-done
	// The claim counts its loss just after closing Done; poll for it.
	lost := m.seatsLost.WithLabelValues("p", coordinator.ReasonForceReleased)
	testkit.Eventually(t, 5*time.Second, "loss counted", func() bool { return counter(t, lost) == 1 })
	want := map[string]float64{
		"granted": counter(t, m.claims.WithLabelValues("p", coordinator.ResultGranted)),
		"no_seat": counter(t, m.claims.WithLabelValues("p", coordinator.ResultNoSeat)),
		"lost":    counter(t, lost),
	}
	for k, v := range want {
		if v != 1 {
			t.Errorf("%s = %v, want 1", k, v)
		}
	}
	got := gather(t, reg)
	if n := got[`etcdpool_grant_wait_seconds_count{pool="p"}`]; n != 1 {
		t.Errorf("grant waits observed = %v, want 1", n)
	}
	if txns := got[`etcdpool_claim_txns_total{pool="p"}`]; txns < 1 {
		t.Errorf("claim txns = %v, want >= 1", txns)
	}
	if n := got[`etcdpool_seat_hold_seconds_count{pool="p"}`]; n != 1 {
		t.Errorf("holds observed after a force-release = %v, want 1", n)
	}
	// A plain release is a hold that ends too, and is timed from the grant.
	cl2 := testkit.Claim(t, co, sess, "p")
	time.Sleep(50 * time.Millisecond)
	if err := cl2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got = gather(t, reg)
	if n, sum := got[`etcdpool_seat_hold_seconds_count{pool="p"}`], got[`etcdpool_seat_hold_seconds_sum{pool="p"}`]; n != 2 || sum < 0.05 {
		t.Errorf("after a release held 50ms: holds %v, sum %vs; want 2 and >= 0.05s", n, sum)
	}
}

// TestFollow checks the pool figures derived from an event stream.
func TestFollow(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewObserved(reg)
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	events := make(chan coordinator.Event, 16)
	for _, ev := range []coordinator.Event{
		{Type: coordinator.EventSeatClaimed, Pool: "p", Holder: "a", Token: 10, Revision: 10, Time: at(0)},
		{Type: coordinator.EventWaiterJoined, Pool: "p", Holder: "b", Revision: 11, Time: at(0)},
		{Type: coordinator.EventWaiterJoined, Pool: "p", Holder: "c", Revision: 12, Time: at(0)},
		{Type: coordinator.EventWaiterLeft, Pool: "p", Holder: "c", Revision: 13, Time: at(time.Second)},
		{Type: coordinator.EventSeatReleased, Pool: "p", Holder: "a", Token: 10, Revision: 14, Time: at(2 * time.Second)},
		{Type: coordinator.EventSeatClaimed, Pool: "p", Holder: "b", Token: 15, Revision: 15, Time: at(2 * time.Second)},
		{Type: coordinator.EventWaiterLeft, Pool: "p", Holder: "b", Revision: 15, Time: at(2 * time.Second)},
		{Type: coordinator.EventSeatExpired, Pool: "p", Holder: "b", Token: 15, Reason: coordinator.ReasonExpired, Revision: 16, Time: at(7 * time.Second)},
		{Type: coordinator.EventSeatForceReleased, Pool: "p", Reason: "operator", Revision: 17},
		{Type: coordinator.EventSeatReleased, Pool: "p", Reason: coordinator.ReasonInstanceGone, Revision: 18},
		{Type: coordinator.EventSeatClaimed, Pool: "other", Holder: "x", Revision: 19},
	} {
		events <- ev
	}
	close(events)
	m.Follow(events, func(p string) bool { return p == "p" })
	for name, c := range map[string]struct {
		c    prometheus.Metric
		want float64
	}{
		"granted":        {m.claims.WithLabelValues("p", "granted"), 2},
		"canceled":       {m.claims.WithLabelValues("p", "canceled"), 1},
		"expired":        {m.seatsLost.WithLabelValues("p", "expired"), 1},
		"force_released": {m.seatsLost.WithLabelValues("p", "force_released"), 1},
		"instance_gone":  {m.seatsLost.WithLabelValues("p", "instance_gone"), 1},
		"other pool":     {m.claims.WithLabelValues("other", "granted"), 0},
	} {
		if got := counter(t, c.c); got != c.want {
			t.Errorf("%s = %v, want %v", name, got, c.want)
		}
	}
	got := gather(t, reg)
	// Holds: a from 0 to 2s, b from 2s to 7s; the force-released and
	// instance-gone seats were claimed before the watch saw them.
	if n, sum := got[`etcdpool_pool_seat_hold_seconds_count{pool="p"}`], got[`etcdpool_pool_seat_hold_seconds_sum{pool="p"}`]; n != 2 || sum != 7 {
		t.Errorf("holds %v summing to %vs, want 2 summing to 7s", n, sum)
	}
	if n, sum := got[`etcdpool_pool_grant_wait_seconds_count{pool="p"}`], got[`etcdpool_pool_grant_wait_seconds_sum{pool="p"}`]; n != 2 || sum != 2 {
		t.Errorf("grant waits %v summing to %vs, want 2 summing to 2s (b waited 2s)", n, sum)
	}
}

// TestKeepaliveFailures checks that the keepalive hook counts failed
// attempts of a session whose only etcd member stopped, before the session
// is given up, and that a lost session is counted apart.
func TestKeepaliveFailures(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	m := New(prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := coordinator.NewSession(ctx, cli, coordinator.WithTTL(2*time.Second), coordinator.WithKeepAliveFailure(m.KeepaliveFailure))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Orphan() // etcd is stopped below; the lease dies with it
	c.Stop(0)
	select {
	case <-sess.Done():
	case <-ctx.Done():
		t.Fatal("session still live 10s after its only etcd member stopped")
	}
	if n := counter(t, m.keepaliveF); n < 1 {
		t.Errorf("keepalive failures = %v once the session was lost, want >= 1", n)
	}
	if n := counter(t, m.sessLost); n != 0 {
		t.Errorf("sessions lost = %v before anyone reported one", n)
	}
	m.SessionLost()
	if n := counter(t, m.sessLost); n != 1 {
		t.Errorf("sessions lost = %v, want 1", n)
	}
}
