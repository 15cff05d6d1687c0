package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdpool/etcdpool/coordinator"
)

// TestRetriesCounted checks the families behind coordinator.Metrics.Retry:
// each retry counts once under its pool and op, and its backoff adds up.
// (Real retries need etcd to answer with an error, a lost leader say:
// TestChaos reports them by op from its claimant processes.)
func TestRetriesCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Retry("p", coordinator.RetryRelease, 50*time.Millisecond)
	m.Retry("p", coordinator.RetryRelease, 100*time.Millisecond)
	m.Retry("q", coordinator.RetryFeedWatch, 0)
	got := gather(t, reg)
	for series, want := range map[string]float64{
		`etcdpool_retries_total{op="release",pool="p"}`:               2,
		`etcdpool_retry_wait_seconds_total{op="release",pool="p"}`:    0.15,
		`etcdpool_retries_total{op="feed_watch",pool="q"}`:            1,
		`etcdpool_retry_wait_seconds_total{op="feed_watch",pool="q"}`: 0,
	} {
		if v, ok := got[series]; !ok || v < want-1e-9 || v > want+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
}
