package metrics

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
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

// gather returns every series of reg as "name{l="v",...}" -> value;
// histograms as name_count.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			key := f.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[f.GetName()+"_count"+key[len(f.GetName()):]] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
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
	co, err := coordinator.New(cli, coordinator.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
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
	cl, err := co.Claim(ctx, sess, "p")
	if err != nil {
		t.Fatal(err)
	}
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
	for deadline := time.Now().Add(5 * time.Second); counter(t, lost) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
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
}

// TestFollow checks the counters derived from an event stream.
func TestFollow(t *testing.T) {
	m := New(prometheus.NewRegistry())
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	events := make(chan coordinator.Event, 16)
	for _, ev := range []coordinator.Event{
		{Type: coordinator.EventSeatClaimed, Pool: "p", Holder: "a", Revision: 10, Time: at(0)},
		{Type: coordinator.EventWaiterJoined, Pool: "p", Holder: "b", Revision: 11, Time: at(0)},
		{Type: coordinator.EventWaiterJoined, Pool: "p", Holder: "c", Revision: 12, Time: at(0)},
		{Type: coordinator.EventWaiterLeft, Pool: "p", Holder: "c", Revision: 13, Time: at(time.Second)},
		{Type: coordinator.EventSeatReleased, Pool: "p", Holder: "a", Revision: 14, Time: at(2 * time.Second)},
		{Type: coordinator.EventSeatClaimed, Pool: "p", Holder: "b", Revision: 15, Time: at(2 * time.Second)},
		{Type: coordinator.EventWaiterLeft, Pool: "p", Holder: "b", Revision: 15, Time: at(2 * time.Second)},
		{Type: coordinator.EventSeatExpired, Pool: "p", Holder: "b", Reason: coordinator.ReasonExpired, Revision: 16},
		{Type: coordinator.EventSeatForceReleased, Pool: "p", Reason: "operator", Revision: 17},
		{Type: coordinator.EventSeatReleased, Pool: "p", Reason: "instance gone", Revision: 18},
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
	if got := counter(t, m.keepaliveF); got != 0 {
		t.Errorf("keepalive failures = %v", got)
	}
}
