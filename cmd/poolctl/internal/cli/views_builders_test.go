package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// fixedSnapshot is a pool read at testNow, for the builders of describe
// and -o wide.
func fixedSnapshot() poolSnapshot {
	return poolSnapshot{
		status: coordinator.PoolStatus{Name: "gpu", Revision: 88, Held: 2, Free: 1, Waiting: 1, Instances: 2,
			Spec: coordinator.PoolSpec{Capacity: 3, SeatTTLSeconds: 15, TenantLimit: 2, TenantLimits: map[string]int{"ci": 1}}},
		instances: []coordinator.Instance{
			{ID: "node-1", Addr: "10.0.0.1:9000", Labels: map[string]string{"zone": "a"}, Seats: 2, State: coordinator.InstanceReady,
				Agent: "agent-1", Lease: 0x694d7c0f1b2a3e01, Revision: 12},
			{ID: "node-2", Seats: 1, State: coordinator.InstanceDraining, Lease: 0x694d7c0f1b2a3e01, Revision: 40},
		},
		seats: []coordinator.Seat{
			{Seat: 0, Holder: "host-a/17", Tenant: "ci", Instance: "node-1", Token: 1042, Lease: 0x694d7c0f1b2a3e04,
				ClaimedAt: testNow.Add(-95 * time.Second), TTL: 7 * time.Second},
			{Seat: 2, Holder: "train-7", Instance: "node-2", Token: 2051, Lease: 0x694d7c0f1b2a3e09, ClaimedAt: testNow.Add(-2 * time.Hour), TTL: -1},
		},
		waiters: []coordinator.Waiter{
			{Position: 0, Holder: "w-1", Tenant: "ci", Lease: 0x694d7c0f1b2a3e0a, Since: testNow.Add(-12 * time.Second), Revision: 2077},
		},
	}
}

// TestViewBuilders renders describe and the -o wide tables from fixed
// data and a fixed clock, so the goldens hold exact values.
func TestViewBuilders(t *testing.T) {
	s := fixedSnapshot()
	wideG := &globalOptions{Output: "wide"}
	seats := seatListViewOf("gpu", s.seats, testNow)
	queue := queueViewOf("gpu", s.waiters, testNow)
	tests := []struct {
		name  string
		build func() string
	}{
		{"describe", func() string {
			return (&describeOptions{g: &globalOptions{Output: "table"}}).describeText(describeViewOf(s, testNow), s)
		}},
		{"describe_wide", func() string {
			return (&describeOptions{g: wideG}).describeText(describeViewOf(s, testNow), s)
		}},
		{"describe_empty", func() string {
			e := poolSnapshot{status: coordinator.PoolStatus{Name: "idle", Revision: 3, Free: 1, Spec: coordinator.PoolSpec{Capacity: 1}}}
			return (&describeOptions{g: &globalOptions{Output: "table"}}).describeText(describeViewOf(e, testNow), e)
		}},
		{"describe_bad_spec", func() string {
			e := poolSnapshot{status: coordinator.PoolStatus{Name: "broken", Revision: 5, Held: 1,
				SpecError: "coordinator: malformed pool spec in etcd: pool \"broken\": unexpected EOF"}}
			return (&describeOptions{g: &globalOptions{Output: "table"}}).describeText(describeViewOf(e, testNow), e)
		}},
		{"wide_seats", func() string {
			h, rows := seatsTable(seats)
			wh, wrows := seatsWide(seats, addrsOf(s.instances))
			return printTable(t, wideG.withWide(Result{Header: h, Rows: rows}, wh, wrows))
		}},
		{"wide_queue", func() string {
			h, rows := queueTable(queue)
			wh, wrows := queueWide(queue, s.waiters)
			return printTable(t, wideG.withWide(Result{Header: h, Rows: rows}, wh, wrows))
		}},
		{"wide_instances", func() string {
			h, rows := instancesTable(instanceListViewOf("gpu", s.instances, s.seats))
			wh, wrows := instancesWide(s.instances)
			return printTable(t, wideG.withWide(Result{Header: h, Rows: rows}, wh, wrows))
		}},
		{"wide_status", func() string {
			pools := []coordinator.PoolStatus{s.status, {Name: "broken", Revision: 5, SpecError: "bad"}}
			h, rows := statusTable(poolListViewOf(pools))
			wh, wrows := statusWide(pools)
			return printTable(t, wideG.withWide(Result{Header: h, Rows: rows}, wh, wrows))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { golden(t, tt.name, tt.build()) })
	}
}

func printTable(t *testing.T, r Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := (&tablePrinter{w: &b}).Print(r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWideOnlyWhenAsked: the same builders print the plain table unless
// -o wide, so the extra columns cannot leak into table output.
func TestWideOnlyWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		output string
		cols   int
	}{{"table", 2}, {"json", 2}, {"yaml", 2}, {"wide", 3}} {
		r := (&globalOptions{Output: tt.output}).withWide(Result{Header: []string{"A", "B"}, Rows: [][]string{{"1", "2"}}},
			[]string{"C"}, [][]string{{"3"}})
		if len(r.Header) != tt.cols || len(r.Rows[0]) != tt.cols {
			t.Errorf("-o %s: header %v rows %v, want %d columns", tt.output, r.Header, r.Rows, tt.cols)
		}
	}
}

// TestSpecChangesReadLikePoolSet: watch's spec-changed text says what
// pool set says for the same change.
func TestSpecChangesReadLikePoolSet(t *testing.T) {
	base := coordinator.PoolSpec{Capacity: 2, TenantLimit: 1, TenantLimits: map[string]int{"ci": 2}}
	tests := []struct {
		name   string
		change func(s *coordinator.PoolSpec)
		fields []string
	}{
		{"nothing", func(*coordinator.PoolSpec) {}, nil},
		{"capacity", func(s *coordinator.PoolSpec) { s.Capacity = 4 }, []string{"capacity"}},
		{"ttl", func(s *coordinator.PoolSpec) { s.SeatTTLSeconds = 30 }, []string{"seatTTL"}},
		{"limit off", func(s *coordinator.PoolSpec) { s.TenantLimit = 0 }, []string{"tenantLimit"}},
		{"override changed and added", func(s *coordinator.PoolSpec) { s.TenantLimits = map[string]int{"ci": 3, "adhoc": 0} },
			[]string{"tenantLimits.adhoc", "tenantLimits.ci"}},
		{"override removed", func(s *coordinator.PoolSpec) { s.TenantLimits = nil }, []string{"tenantLimits.ci"}},
		{"everything", func(s *coordinator.PoolSpec) {
			*s = coordinator.PoolSpec{Capacity: 9, SeatTTLSeconds: 20, TenantLimit: 3, RequireInstance: true}
		}, []string{"capacity", "seatTTL", "tenantLimit", "tenantLimits.ci", "requireInstance"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base
			b.TenantLimits = map[string]int{"ci": 2}
			tt.change(&b)
			cs := specChanges(base, b)
			var fields []string
			for _, c := range cs {
				fields = append(fields, c.Field)
				if c.Old == c.New {
					t.Errorf("%s: unchanged value listed: %+v", tt.name, c)
				}
			}
			if len(fields) != len(tt.fields) || (len(fields) > 0 && !equalStrings(fields, tt.fields)) {
				t.Errorf("fields %v, want %v", fields, tt.fields)
			}
			if got, want := specChangesText(cs), specDiff(base, b); got != want {
				t.Errorf("text %q, pool set says %q", got, want)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
