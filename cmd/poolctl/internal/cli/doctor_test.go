package cli

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestDoctor plants the damage issue 9 lists next to healthy state and
// checks that doctor names every damaged key and no healthy one, that
// --fix deletes them (not a corrupt spec), and that the pool then grants
// a seat.
func TestDoctor(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2})
	h.createPool("bad", coordinator.PoolSpec{Capacity: 1})
	held := h.claim("p") // healthy: must not be reported
	ctx := testkit.Ctx(t, 20*time.Second)
	sess := h.session(10 * time.Second)
	root := coordinator.DefaultPrefix
	seg := func(s string) string { return coordinator.SegPrefix(root, "p", s) }
	seatVal, _ := json.Marshal(map[string]any{"holder": "ghost", "tenantSlot": -1, "bindSlot": -1})
	const ghost = "00000000000000aa-0000000000000002" // a claim's <lease>-<nonce>
	planted := map[string]struct {
		value  string
		leased bool
		want   string
	}{
		seg(coordinator.SegQueue) + "00000000000000aa-0000000000000001": {"{}", false, "queue key without a lease"},
		coordinator.SeatPrefix(root, "p", 1-held.Seat()) + ghost:        {string(seatVal), false, "seat key without a lease"},
		coordinator.SeatPrefix(root, "p", 9999999) + ghost:              {string(seatVal), true, "seat number 9999999 above the seat-number range 0..999999"},
		seg(coordinator.SegSeats) + "1":                                 {string(seatVal), true, "foreign key"},
		seg(coordinator.SegSeats) + "0000005":                           {string(seatVal), true, "schema before v0.3"},
		coordinator.PoolPrefix(root, "p") + "grants/" + ghost:           {"{}", true, "grant key of the schema before v0.4"},
		coordinator.PoolPrefix(root, "p") + "junk/x":                    {"x", true, "foreign key"},
		seg(coordinator.SegInstances) + "i0":                            {"\x1b[31mgarbage", true, "corrupt instance value"},
		seg(coordinator.SegInstances) + "i1":                            {`{"id":"other"}`, true, "corrupt instance value"},
	}
	for key, p := range planted {
		var opts []clientv3.OpOption
		if p.leased {
			opts = append(opts, clientv3.WithLease(sess.Lease()))
		}
		if _, err := h.cli.Put(ctx, key, p.value, opts...); err != nil {
			t.Fatal(err)
		}
	}
	specKey := coordinator.SegPrefix(root, "bad", coordinator.SegSpec)
	if _, err := h.cli.Put(ctx, specKey, "not json"); err != nil {
		t.Fatal(err)
	}
	// A state a newer etcdpool may write: reported, never deleted, since
	// deleting the instance would end its holders' seats.
	newer := map[string]string{ // a state it does not know, a field whose type changed
		coordinator.SegPrefix(root, "bad", coordinator.SegInstances) + "n1": `{"id":"n1","state":"cordoned"}`,
		coordinator.SegPrefix(root, "bad", coordinator.SegInstances) + "n2": `{"id":"n2","seats":"2"}`,
	}
	for key, val := range newer {
		if _, err := h.cli.Put(ctx, key, val, clientv3.WithLease(sess.Lease())); err != nil {
			t.Fatal(err)
		}
	}

	r := h.run("doctor", "-o", "json")
	r.want(t, ExitOK)
	var v doctorView
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, r.out)
	}
	got := map[string]doctorFindingView{}
	for _, f := range v.Findings {
		got[f.Key] = f
	}
	for key, p := range planted {
		if f, ok := got[key]; !ok || !strings.Contains(f.Problem, p.want) || !f.Fixable {
			t.Errorf("%q: finding %+v, want %q", key, f, p.want)
		}
	}
	if f, ok := got[specKey]; !ok || f.Fixable || !strings.Contains(f.Problem, "corrupt pool spec") {
		t.Errorf("corrupt spec: %+v", f)
	}
	for key := range newer {
		if f, ok := got[key]; !ok || f.Fixable || !strings.Contains(f.Problem, "does not accept") {
			t.Errorf("a newer etcdpool's instance record %s: %+v", key, f)
		}
	}
	if len(got) != len(planted)+1+len(newer) {
		t.Errorf("%d findings, want %d (healthy keys reported?): %+v", len(got), len(planted)+1+len(newer), v.Findings)
	}

	table := h.run("doctor", "p")
	table.want(t, ExitOK)
	if strings.Contains(table.out, "\x1b") {
		t.Errorf("doctor's table prints a raw escape character:\n%q", table.out)
	}

	h.run("doctor", "--fix").want(t, ExitOK)
	r = h.run("doctor", "p")
	r.want(t, ExitOK)
	if !strings.Contains(r.out, "no problems under /etcdpool/pools/p/") {
		t.Errorf("after --fix: %s", r.out)
	}
	for _, key := range append([]string{specKey}, slices.Collect(maps.Keys(newer))...) {
		if resp, err := h.cli.Get(ctx, key); err != nil || len(resp.Kvs) != 1 {
			t.Errorf("--fix deleted %s: %v", key, err)
		}
	}
	if resp, err := h.cli.Get(ctx, coordinator.SeatPrefix(root, "p", held.Seat()), clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("--fix touched a healthy seat: %v", err)
	}
	h.run("run", "p", "--no-wait", "--", "true").want(t, ExitOK)
}
