package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// startWatch runs poolctl watch in the background and returns once it
// streams: it pokes the pool (spec rewrites, which show as spec-changed)
// until the first event arrives.
func (h *harness) startWatch(t *testing.T, pool string, args ...string) (*invocation, func() result) {
	t.Helper()
	inv := newInvocation()
	wait := h.start(inv, append([]string{"watch"}, args...)...)
	p, err := h.c.GetPool(testkit.Ctx(t, 5*time.Second), pool)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "watch to stream", func() bool {
		if _, err := h.c.UpdatePool(context.Background(), pool, p.Spec, 0); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(inv.out.String(), "spec-changed")
	})
	return inv, wait
}

// jsonEvents decodes JSON lines, dropping the spec-changed pokes.
func jsonEvents(t *testing.T, out string) []eventView {
	t.Helper()
	var evs []eventView
	for _, l := range lines(out) {
		var ev eventView
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		if ev.Type != string(coordinator.EventSpecChanged) {
			evs = append(evs, ev)
		}
	}
	return evs
}

func TestWatchJSON(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	h.createPool("other", coordinator.PoolSpec{Capacity: 1})
	inv, wait := h.startWatch(t, "gpu", "gpu", "-o", "json")
	ctx := testkit.Ctx(t, 20*time.Second)
	a := h.claim("gpu", coordinator.WithHolder("alice"), coordinator.WithTenant("ci"))
	h.claim("other", coordinator.WithHolder("elsewhere")) // not in this watch
	bob := make(chan *coordinator.Claim, 1)
	s := h.session(10 * time.Second)
	go func() {
		cl, err := h.c.Claim(ctx, s, "gpu", coordinator.WithHolder("bob"), coordinator.WithWait())
		if err != nil {
			t.Error(err)
		}
		bob <- cl
	}()
	testkit.Eventually(t, 10*time.Second, "bob to queue", func() bool { return strings.Contains(inv.out.String(), "waiter-joined") })
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-bob
	if _, err := h.c.ForceRelease(ctx, "gpu", b.Seat(), b.Token(), "maintenance"); err != nil {
		t.Fatal(err)
	}
	c := h.claim("gpu", coordinator.WithHolder("carol"))
	etcdtest.Revoke(t, h.cli, c.Lease())
	testkit.Eventually(t, 10*time.Second, "expiry event", func() bool { return strings.Contains(inv.out.String(), "seat-expired") })
	inv.sigs.send(t, os.Interrupt)
	r := wait()
	r.want(t, ExitOK)
	const rec, recv = timeRecord, timeReceived
	want := []eventView{
		{Type: "seat-claimed", Pool: "gpu", Seat: a.Seat(), Token: a.Token(), Holder: "alice", Tenant: "ci", TimeSource: rec},
		{Type: "waiter-joined", Pool: "gpu", Seat: -1, Holder: "bob", TimeSource: rec},
		{Type: "seat-released", Pool: "gpu", Seat: a.Seat(), Token: a.Token(), Holder: "alice", Tenant: "ci", TimeSource: rec},
		{Type: "seat-claimed", Pool: "gpu", Seat: b.Seat(), Token: b.Token(), Holder: "bob", TimeSource: rec},
		{Type: "waiter-left", Pool: "gpu", Seat: -1, Holder: "bob", TimeSource: recv},
		{Type: "seat-force-released", Pool: "gpu", Seat: b.Seat(), Token: b.Token(), Holder: "bob", Reason: "maintenance", TimeSource: rec},
		{Type: "seat-claimed", Pool: "gpu", Seat: c.Seat(), Token: c.Token(), Holder: "carol", TimeSource: rec},
		{Type: "seat-expired", Pool: "gpu", Seat: c.Seat(), Token: c.Token(), Holder: "carol", Reason: coordinator.ReasonExpired, TimeSource: recv},
	}
	got := jsonEvents(t, r.out)
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n%s", len(got), len(want), r.out)
	}
	var last int64
	for i, ev := range got {
		if ev.Revision < last || ev.Time.IsZero() {
			t.Errorf("event %d: revision %d after %d, time %v", i, ev.Revision, last, ev.Time)
		}
		// Received times are the injected clock's; record times the
		// claimants' real clock.
		if fromClock := ev.Time.Equal(testNow); fromClock != (ev.TimeSource == timeReceived) {
			t.Errorf("event %d (%s): time %v with timeSource %q", i, ev.Type, ev.Time, ev.TimeSource)
		}
		if len(ev.Changes) != 0 {
			t.Errorf("event %d (%s): changes %v", i, ev.Type, ev.Changes)
		}
		last = ev.Revision
		ev.Revision, ev.Time, ev.Changes = 0, time.Time{}, nil
		if !reflect.DeepEqual(ev, want[i]) {
			t.Errorf("event %d = %+v\n          want %+v", i, ev, want[i])
		}
	}
}

func TestWatchTable(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	inv, wait := h.startWatch(t, "gpu")
	h.createPool("new", coordinator.PoolSpec{Capacity: 1})
	cl := h.claim("new", coordinator.WithHolder("alice"))
	if err := cl.Release(testkit.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.run("pool", "delete", "new").want(t, ExitOK)
	testkit.Eventually(t, 10*time.Second, "pool-deleted", func() bool { return strings.Contains(inv.out.String(), "pool-deleted") })
	inv.sigs.send(t, os.Interrupt)
	r := wait()
	r.want(t, ExitOK)
	var kept []string
	for i, l := range lines(r.out) {
		if i == 0 || !strings.Contains(l, "spec-changed") {
			tok := fmt.Sprint(cl.Token()) // same width, so the columns stay put
			kept = append(kept, strings.Replace(l, " "+tok+" ", " *"+strings.Repeat(" ", len(tok)-1)+" ", 1))
		}
	}
	golden(t, "watch_table", maskClock(strings.Join(kept, "\n")+"\n"))
}

func TestWatchErrors(t *testing.T) {
	h := newHarness(t)
	h.run("watch", "nope").want(t, ExitNotFound)
	h.run("watch", "a/b").want(t, ExitUsage)
	h.run("watch", "a", "b").want(t, ExitUsage)
}
