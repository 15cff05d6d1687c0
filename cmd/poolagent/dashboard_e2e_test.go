package main

import (
	"context"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/deploy/grafana"
	"github.com/etcdpool/etcdpool/deploy/prometheus"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// pendingMetrics are names the dashboard and rules may use before the
// binaries export them, each with the change that adds it. The test fails
// once a pending name is exported, so the entry cannot outlive its reason.
var pendingMetrics = map[string]string{}

// TestDashboardAndRulesUseExportedMetrics runs a real agent and a real
// sidecar, drives a claim, a waiter and a force-release so that every
// family has a series, and checks that every etcdpool_ name the Grafana
// dashboard and the alerting rules query is in their /metrics.
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	a := startAgent(t, c.Endpoint(0), `
agent:
  pools:
    - {name: d, capacity: 1}
  instances:
    - {pool: d, id: i1, address: "127.0.0.1:9001"}
`)
	sc := startSidecar(t, c.Endpoint(0), "d", "sc", "--ttl", "10s", "--loss-grace", "8s")
	sc.waitReady(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	granted := make(chan error, 1)
	go func() {
		_, err := co.Claim(ctx, testkit.Session(t, cli, 2*time.Second), "d", coordinator.WithWait(), coordinator.WithHolder("waiter"))
		granted <- err
	}()
	testkit.Eventually(t, 5*time.Second, "waiter queued", func() bool { return queueLen(t, co, "d") == 1 })
	agentNames := waitFamilies(t, a.url+agent.MetricsPath, "etcdpool_pool_oldest_waiter_seconds")
	// A second sidecar waits behind it, so that the per-reason waiting
	// gauge has a series.
	sc2 := startSidecar(t, c.Endpoint(0), "d", "sc2", "--ttl", "10s")
	testkit.Eventually(t, 10*time.Second, "the second sidecar's listener", func() bool {
		return httpStatus(sc2.url+agent.MetricsPath) == http.StatusOK
	})
	waiting := waitFamilies(t, sc2.url+agent.MetricsPath, "etcdpool_waiters")
	held, ok := heldBy(seats(t, co, "d"), "sc")
	if !ok {
		t.Fatal("the sidecar holds no seat")
	}
	if _, err := co.ForceRelease(ctx, "d", held.Seat, held.Token, "dashboard test"); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	sidecarNames := waitFamilies(t, sc.url+agent.MetricsPath, "etcdpool_seats_lost_total", "etcdpool_seat_hold_seconds")
	for n := range waitFamilies(t, a.url+agent.MetricsPath, "etcdpool_pool_seats_lost_total", "etcdpool_pool_seat_hold_seconds") {
		agentNames[n] = true
	}
	exported := maps.Clone(agentNames)
	maps.Copy(exported, sidecarNames)
	maps.Copy(exported, waiting)

	used := usedMetricNames(t)
	if len(used) < 10 {
		t.Fatalf("found only %d metric names in the dashboard and rules: %v", len(used), slices.Sorted(maps.Keys(used)))
	}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		_, pending := pendingMetrics[name]
		switch {
		case exported[familyOf(name, exported)] && pending:
			t.Errorf("%s is exported now: remove it from pendingMetrics", name)
		case pending:
			t.Logf("%s: not exported yet (%s)", name, pendingMetrics[name])
		case !exported[familyOf(name, exported)]:
			t.Errorf("%s is queried by %s but neither poolagent serve nor sidecar exports it", name, strings.Join(used[name], ", "))
		}
	}
}

// metricName matches the etcdpool_ names in a PromQL expression.
var metricName = regexp.MustCompile(`\betcdpool_[a-zA-Z0-9_]+`)

// usedMetricNames returns every etcdpool_ name of the dashboard's and the
// rules' queries, with where it is used.
func usedMetricNames(t *testing.T) map[string][]string {
	t.Helper()
	dash, err := grafana.Queries()
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	rules, err := prometheus.Exprs()
	if err != nil {
		t.Fatalf("rules: %v", err)
	}
	used := map[string][]string{}
	for src, exprs := range map[string][]string{"deploy/grafana/etcdpool.json": dash, "deploy/prometheus/etcdpool-rules.yaml": rules} {
		for _, e := range exprs {
			for _, n := range metricName.FindAllString(e, -1) {
				if !slices.Contains(used[n], src) {
					used[n] = append(used[n], src)
					sort.Strings(used[n])
				}
			}
		}
	}
	return used
}

// familyOf maps a histogram's series name (_bucket, _sum, _count) to its
// family when that family is exported.
func familyOf(name string, families map[string]bool) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] {
			return base
		}
	}
	return name
}

// waitFamilies scrapes url until it exports every family in want, and
// returns the names of the families it exports.
func waitFamilies(t *testing.T, url string, want ...string) map[string]bool {
	t.Helper()
	var names map[string]bool
	testkit.Eventually(t, 10*time.Second, "families "+strings.Join(want, ", ")+" at "+url, func() bool {
		names = scrapeFamilies(t, url)
		for _, w := range want {
			if !names[w] {
				return false
			}
		}
		return true
	})
	return names
}

func scrapeFamilies(t *testing.T, url string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for n, f := range scrapeRaw(t, url) {
		if len(f.GetMetric()) > 0 {
			names[n] = true
		}
	}
	return names
}
