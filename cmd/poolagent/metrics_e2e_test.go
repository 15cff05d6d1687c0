package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

const metricsAgent = `
agent:
  pools:
    - {name: m, capacity: 2, requireInstance: true}
  instances:
    - {pool: m, id: i1, address: "127.0.0.1:9001"}
    - {pool: m, id: i2, address: "127.0.0.1:9002"}
`

// TestAgentMetricsAfterKnownClaims drives a known sequence of claims from
// this process and checks the agent's /metrics, parsed with the
// Prometheus text parser.
func TestAgentMetricsAfterKnownClaims(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	a := startAgent(t, c.Endpoint(0), metricsAgent)
	url := a.url + agent.MetricsPath
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s1 := testkit.Session(t, cli, coordinator.MinTTL)
	c1, err1 := co.Claim(ctx, s1, "m")
	c2, err2 := co.Claim(ctx, s1, "m")
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	waitMetrics(t, url, map[string]float64{
		`etcdpool_pool_held{pool="m"}`:                          2,
		`etcdpool_pool_claims_total{pool="m",result="granted"}`: 2,
		`etcdpool_instances{pool="m",state="ready"}`:            2,
		`etcdpool_instances{pool="m",state="draining"}`:         0,
		`etcdpool_pool_capacity{pool="m"}`:                      2,
		`etcdpool_lease_keepalive_failures_total`:               0,
		`etcdpool_sessions_lost_total`:                          0,
		`etcdpool_pool_grant_wait_seconds_count{pool="m"}`:      2,
		`etcdpool_etcd_up`:                                      1,
		`etcdpool_agent_ready`:                                  1,
		`etcdpool_agent_lease_alive`:                            1,
	})

	// A waiter queues behind the full pool; a second one gives up.
	s3 := testkit.Session(t, cli, coordinator.MinTTL)
	granted := queueWaiterAndQuitter(ctx, t, co, cli, s3, url)

	// Releasing c1 grants the waiter; then c2 is force-released and the
	// waiter's lease is revoked (an expiry).
	if err := c1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c3 := <-granted; c3 == nil {
		t.Fatal("waiter not granted after a release")
	}
	if _, err := co.ForceRelease(ctx, "m", c2.Seat(), c2.Token(), "test"); err != nil {
		t.Fatal(err)
	}
	etcdtest.Revoke(t, cli, s3.Lease())
	fams := waitMetrics(t, url, map[string]float64{
		`etcdpool_pool_held{pool="m"}`:                                     0,
		`etcdpool_pool_waiting{pool="m"}`:                                  0,
		`etcdpool_pool_claims_total{pool="m",result="granted"}`:            3,
		`etcdpool_pool_claims_total{pool="m",result="canceled"}`:           1,
		`etcdpool_pool_grant_wait_seconds_count{pool="m"}`:                 3,
		`etcdpool_pool_seats_lost_total{pool="m",reason="force_released"}`: 1,
		`etcdpool_pool_seats_lost_total{pool="m",reason="expired"}`:        1,
		`etcdpool_instances{pool="m",state="ready"}`:                       2,
		`etcdpool_pool_seat_hold_seconds_count{pool="m"}`:                  3,
	})
	if sum := fams[`etcdpool_pool_grant_wait_seconds_sum{pool="m"}`]; sum < 0.3 {
		t.Errorf("grant wait sum %v, want >= 0.3s: the waiter queued for longer", sum)
	}

	// With its only etcd member stopped, the agent's keepalives fail until
	// its session's deadline passes and the session is lost.
	c.Stop(0)
	waitMetricsAtLeast(t, url, map[string]float64{
		`etcdpool_lease_keepalive_failures_total`: 1,
		`etcdpool_sessions_lost_total`:            1,
	})
	c.Restart(t, 0)
}

// queueWaiterAndQuitter queues a waiter on the full pool m, then has a
// second claimant queue and give up after 300ms. The channel yields the
// waiter's claim once granted.
func queueWaiterAndQuitter(ctx context.Context, t *testing.T, co *coordinator.Coordinator, cli *clientv3.Client, s3 *coordinator.Session, url string) <-chan *coordinator.Claim {
	t.Helper()
	granted := make(chan *coordinator.Claim, 1)
	go func() {
		cl, err := co.Claim(ctx, s3, "m", coordinator.WithWait(), coordinator.WithHolder("waiter"))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		granted <- cl
	}()
	testkit.Eventually(t, 5*time.Second, "waiter queued", func() bool { return queueLen(t, co, "m") == 1 })
	waitMetrics(t, url, map[string]float64{`etcdpool_pool_waiting{pool="m"}`: 1})
	gctx, gcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer gcancel()
	if _, err := co.Claim(gctx, testkit.Session(t, cli, coordinator.MinTTL), "m", coordinator.WithWait(), coordinator.WithHolder("quitter")); err == nil {
		t.Fatal("second waiter granted a seat of a full pool")
	}
	return granted
}

// waitMetrics scrapes url until every series in want has its value, and
// returns the last scrape.
func waitMetrics(t *testing.T, url string, want map[string]float64) map[string]float64 {
	t.Helper()
	return waitSeries(t, url, want, "", func(got, want float64) bool { return got == want })
}

// waitMetricsAtLeast scrapes url until every series in want is at least
// its value.
func waitMetricsAtLeast(t *testing.T, url string, want map[string]float64) {
	t.Helper()
	waitSeries(t, url, want, "at least ", func(got, want float64) bool { return got >= want })
}

func waitSeries(t *testing.T, url string, want map[string]float64, rel string, ok func(got, want float64) bool) map[string]float64 {
	t.Helper()
	var got map[string]float64
	var diff []string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got, diff = scrape(t, url), nil
		for k, v := range want {
			if g, present := got[k]; !present || !ok(g, v) {
				diff = append(diff, fmt.Sprintf("%s = %v (present %v), want %s%v", k, g, present, rel, v))
			}
		}
		if len(diff) == 0 {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	sort.Strings(diff)
	t.Fatalf("metrics did not converge:\n%s", strings.Join(diff, "\n"))
	return nil
}

// scrape parses /metrics with the Prometheus text parser into series (see
// testkit.Series).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	return testkit.Series(slices.Collect(maps.Values(scrapeRaw(t, url))))
}

// scrapeRaw gets url and parses it with the Prometheus text parser; a
// failed request, a status other than 200 or a parse error fails the test.
func scrapeRaw(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	return fams
}
