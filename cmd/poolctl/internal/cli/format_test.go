package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/termsafe"
)

func TestAge(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {59 * time.Second, "59s"}, {time.Minute, "1m"},
		{90 * time.Second, "1m30s"}, {time.Hour, "1h"}, {time.Hour + 5*time.Minute, "1h5m"},
		{49 * time.Hour, "2d1h"}, {48 * time.Hour, "2d"},
	}
	for _, tt := range tests {
		if got := age(tt.d); got != tt.want {
			t.Errorf("age(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestBar(t *testing.T) {
	tests := []struct {
		held, capacity int
		want           string
	}{
		{0, 4, "[..........]   0%"}, {1, 4, "[###.......]  25%"}, {4, 4, "[##########] 100%"},
		{6, 4, "[##########] 150%"}, {1, 1000, "[#.........]   0%"}, {0, 0, "-"},
	}
	for _, tt := range tests {
		if got := bar(tt.held, tt.capacity); got != tt.want {
			t.Errorf("bar(%d, %d) = %q, want %q", tt.held, tt.capacity, got, tt.want)
		}
	}
}

// TestTableBuilders renders every table from fixed data and a fixed clock,
// so the goldens hold exact ages and TTLs.
func TestTableBuilders(t *testing.T) {
	claimed := testNow.Add(-95 * time.Second)
	seats := seatListViewOf("gpu", []coordinator.Seat{
		{Seat: 0, Holder: "host-a/17", Tenant: "ci", Instance: "node-1", Token: 1042, Lease: 0x694d7c0f1b2a3e04, ClaimedAt: claimed, TTL: 7 * time.Second},
		{Seat: 3, Holder: "train-7", Token: 2051, Lease: 0x694d7c0f1b2a3e09, ClaimedAt: testNow.Add(-2 * time.Hour), TTL: -1},
	}, testNow)
	queue := queueViewOf("gpu", []coordinator.Waiter{
		{Position: 0, Holder: "w-1", Tenant: "ci", Since: testNow.Add(-12 * time.Second), Reason: coordinator.WaitPoolFull, Detail: `pool "gpu" holds 2 of 2`},
		{Position: 1, Holder: "w-2", Labels: map[string]string{"zone": "a", "gpu": "a100"}, Since: testNow.Add(-3 * time.Second), Reason: coordinator.WaitQueue, Ahead: 1},
		{Position: -1, Holder: "w-3", Tenant: "ci", Since: testNow.Add(-5 * time.Second), Reason: coordinator.WaitTenantLimit, Detail: `tenant "ci" holds 1 of its limit 1`},
	}, testNow)
	inst := instanceListViewOf("gpu", []coordinator.Instance{
		{ID: "node-1", Addr: "10.0.0.1:9000", Labels: map[string]string{"zone": "a"}, Seats: 2, State: coordinator.InstanceReady, Agent: "agent-1"},
		{ID: "node-2", Seats: 1, State: coordinator.InstanceDraining},
	}, []coordinator.Seat{{Instance: "node-1"}})
	pools := poolListViewOf([]coordinator.PoolStatus{
		{Name: "builds", Spec: coordinator.PoolSpec{Capacity: 20, TenantLimit: 5, SeatTTLSeconds: 30}, Held: 7, Free: 13, Waiting: 0, Instances: 0},
		{Name: "gpu", Spec: coordinator.PoolSpec{Capacity: 4, RequireInstance: true}, Held: 4, Free: 0, Waiting: 2, Instances: 2},
		{Name: "broken", Held: 1, SpecError: "coordinator: malformed pool spec in etcd: pool \"broken\": unexpected EOF"},
	})
	pool := poolViewOf(coordinator.Pool{Name: "builds", Revision: 88, Spec: coordinator.PoolSpec{
		Capacity: 20, SeatTTLSeconds: 30, TenantLimit: 5, TenantLimits: map[string]int{"ci": 10, "adhoc": 0}}})
	event := eventView{Type: "seat-force-released", Pool: "gpu", Seat: 1, Token: 2051, Holder: "train-7", Reason: "stuck", Time: testNow}
	tests := []struct {
		name  string
		build func() ([]string, [][]string)
	}{
		{"builder_seats", func() ([]string, [][]string) { return seatsTable(seats) }},
		{"builder_queue", func() ([]string, [][]string) { return queueTable(queue) }},
		{"builder_instances", func() ([]string, [][]string) { return instancesTable(inst) }},
		{"builder_status", func() ([]string, [][]string) { return statusTable(pools) }},
		{"builder_pool_list", func() ([]string, [][]string) { return poolListTable(pools) }},
		{"builder_pool_get", func() ([]string, [][]string) { return poolTable(pool) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			h, rows := tt.build()
			if err := (&tablePrinter{w: &b}).Print(Result{Header: h, Rows: rows}); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, b.String())
		})
	}
	t.Run("builder_event_stream", func(t *testing.T) {
		var b bytes.Buffer
		p := &tablePrinter{w: &b}
		h, rows := eventTable(event)
		for range 2 {
			if err := p.Stream(Result{Header: h, Rows: rows}); err != nil {
				t.Fatal(err)
			}
		}
		golden(t, "builder_event_stream", maskClock(b.String()))
	})
}

func TestNoHeaders(t *testing.T) {
	var b bytes.Buffer
	h, rows := seatsTable(seatListView{Seats: []seatView{{Seat: 2, Holder: "x", Token: 9, TTLSeconds: -1}}})
	if err := (&tablePrinter{w: &b, noHeaders: true}).Print(Result{Header: h, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "2   x   -   -   9   0s   ?\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A holder that another client wrote raw into etcd, with a bidirectional
// override, DEL and a C1 control (CSI), is printed escaped by -o json and
// -o yaml, and the value read back from either is the one in etcd. Found
// by a review (2026-12-05): -o json printed them raw, and -o yaml failed
// for the whole pool ("yaml: control characters are not allowed").
func TestJSONAndYAMLEscapeHostileValues(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	const hostile = "admin\u202egnp.exe\u007f\u009b2J"
	hostileSeat(t, h, "p", hostile)
	for _, o := range []string{"json", "yaml"} {
		r := h.run("seats", "p", "-o", o)
		r.want(t, ExitOK)
		if strings.ContainsFunc(r.out, func(c rune) bool { return c != '\n' && termsafe.Unsafe(c) }) {
			t.Errorf("seats -o %s prints unsafe runes raw: %q", o, r.out)
		}
		var got struct{ Seats []struct{ Holder string } }
		want := hostile // -o json keeps it; -o yaml shows it as the tables do
		if o == "yaml" {
			want = termsafe.Escape(hostile)
		}
		if err := yaml.Unmarshal([]byte(r.out), &got); err != nil || len(got.Seats) != 1 || got.Seats[0].Holder != want {
			t.Errorf("seats -o %s read back: %+v, %v; want holder %q", o, got, err, want)
		}
	}
}
