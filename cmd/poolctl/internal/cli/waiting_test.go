//go:build unix

package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestNobodyWaitsInvisibly is issue 11's scenario through poolctl: a pool
// asr of capacity 3 with tenant limit 1 and five jobs (tenants a, a, b, b,
// none). While the second a and b jobs wait, status shows WAITING 2, queue
// lists both with why, watch shows them join, run -v says why, and explain
// agrees with all of them.
func TestNobodyWaitsInvisibly(t *testing.T) {
	h := newHarness(t)
	h.createPool("asr", coordinator.PoolSpec{Capacity: 3, TenantLimit: 1, TenantLimits: map[string]int{"x": 0}})
	ctx := testkit.Ctx(t, 60*time.Second)
	watchInv, stopWatch := h.startWatch(t, "asr", "asr", "-o", "json")
	h.claim("asr", coordinator.WithHolder("a1"), coordinator.WithTenant("a"))
	h.claim("asr", coordinator.WithHolder("b1"), coordinator.WithTenant("b"))
	n1 := h.claim("asr", coordinator.WithHolder("n1"))
	runs := map[string]*invocation{}
	waits := map[string]func() result{}
	for _, tenant := range []string{"a", "b"} {
		inv := newInvocation()
		runs[tenant] = inv
		waits[tenant] = h.runChild(t, inv, t.TempDir(), []string{"asr", "--tenant", tenant, "--holder", tenant + "2", "-v"}, "true")
	}
	testkit.Eventually(t, 10*time.Second, "two waiters", func() bool { ws, _ := h.c.Queue(ctx, "asr"); return len(ws) == 2 })

	r := h.run("status")
	r.want(t, ExitOK)
	if f := strings.Fields(lines(r.out)[1]); f[0] != "asr" || f[4] != "2" {
		t.Errorf("status row %q: want WAITING 2\n%s", lines(r.out)[1], r.out)
	}
	r = h.run("queue", "asr")
	r.want(t, ExitOK)
	for _, tenant := range []string{"a", "b"} {
		why := `tenant at limit: tenant "` + tenant + `" holds 1 of its limit 1`
		if !strings.Contains(r.out, why) {
			t.Errorf("queue does not say %q:\n%s", why, r.out)
		}
	}
	r = h.run("queue", "asr", "-o", "json")
	var q queueView
	if err := json.Unmarshal([]byte(r.out), &q); err != nil || len(q.Waiters) != 2 {
		t.Fatalf("queue -o json: %v\n%s", err, r.out)
	}
	for _, w := range q.Waiters {
		if w.Position != -1 || w.Reason != string(coordinator.WaitTenantLimit) || w.Detail == "" {
			t.Errorf("waiter %+v: want position -1, reason tenant_limit, a detail", w)
		}
	}
	for tenant, inv := range runs {
		want := `waiting for a seat in pool "asr": tenant at limit: tenant "` + tenant + `" holds 1 of its limit 1`
		testkit.Eventually(t, 5*time.Second, "run -v says why", func() bool { return strings.Contains(inv.err.String(), want) })
	}
	testkit.Eventually(t, 5*time.Second, "watch shows both joining", func() bool {
		joined := 0
		for _, ev := range jsonEvents(t, watchInv.out.String()) {
			if ev.Type == string(coordinator.EventWaiterJoined) && ev.Reason == string(coordinator.WaitTenantLimit) {
				joined++
			}
		}
		return joined == 2
	})

	r = h.run("explain", "asr", "--tenant", "a")
	r.want(t, ExitTimeout)
	if !strings.Contains(r.err, `would not be granted now: pool full: pool "asr" holds 3 of 3`) {
		t.Errorf("explain's error line: %q", r.err)
	}
	for _, s := range []string{`A claim on pool "asr" for tenant "a" would wait`, "pool full", "tenant at limit", "try: poolctl pool set asr --tenant-limit-for a=2"} {
		if !strings.Contains(r.out, s) {
			t.Errorf("explain --tenant a does not say %q:\n%s", s, r.out)
		}
	}
	r = h.run("explain", "asr", "--tenant", "x", "-o", "json")
	var e explainView
	if err := json.Unmarshal([]byte(r.out), &e); err != nil || e.Granted || !e.Never || e.Blockers[0].Reason != string(coordinator.WaitTenantDenied) {
		t.Fatalf("explain --tenant x: %+v, %v\n%s", e, err, r.out)
	}
	if err := n1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h.run("explain", "asr", "--tenant", "c").want(t, ExitOK)

	// A denied tenant fails at once; a wait that runs out says why.
	r = h.runChild(t, newInvocation(), t.TempDir(), []string{"asr", "--tenant", "x"}, "true")()
	r.want(t, ExitTimeout)
	if !strings.Contains(r.err, `tenant "x" is denied`) {
		t.Errorf("denied tenant: %q", r.err)
	}
	r = h.runChild(t, newInvocation(), t.TempDir(), []string{"asr", "--tenant", "a", "--wait", "300ms"}, "true")()
	r.want(t, ExitTimeout)
	if !strings.Contains(r.err, `still waiting: tenant at limit: tenant "a" holds 1 of its limit 1`) {
		t.Errorf("--wait ran out: %q", r.err)
	}

	for tenant, inv := range runs {
		inv.sigs.send(t, os.Interrupt)
		waits[tenant]().want(t, ExitInterrupted)
	}
	watchInv.sigs.send(t, os.Interrupt)
	stopWatch().want(t, ExitOK)
	if ws, err := h.c.Queue(ctx, "asr"); err != nil || len(ws) != 0 {
		t.Fatalf("queue after the runs: %+v, %v", ws, err)
	}
}

func TestExplainUsage(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	h.run("explain").want(t, ExitUsage)
	h.run("explain", "p", "--label", "zone").want(t, ExitUsage)
	h.run("explain", "p", "--tenant", "a/b").want(t, ExitUsage)
	h.run("explain", "nope").want(t, ExitNotFound)
	r := h.run("explain", "p", "--labels", "zone=a", "-o", "json")
	r.want(t, ExitTimeout) // no instance carries zone=a
	var e explainView
	if err := json.Unmarshal([]byte(r.out), &e); err != nil || e.Labels["zone"] != "a" || e.Blockers[0].Reason != string(coordinator.WaitNoMatchingInstance) {
		t.Fatalf("explain --labels zone=a: %+v, %v", e, err)
	}
}
