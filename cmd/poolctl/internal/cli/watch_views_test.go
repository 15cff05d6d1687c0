package cli

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// currentRev is etcd's revision now.
func (h *harness) currentRev(t *testing.T) int64 {
	t.Helper()
	resp, err := h.cli.Get(testkit.Ctx(t, 5*time.Second), "rev-probe")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// TestWatchReplay replays history with --rev, filtered by --type: each
// event of the kinds asked for, in order, with record times where the
// record has one and the fields a spec change changed.
func TestWatchReplay(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	from := h.currentRev(t) + 1
	a := h.claim("gpu", coordinator.WithHolder("alice"))
	seats, err := h.c.Seats(testkit.Ctx(t, 5*time.Second), "gpu")
	if err != nil || len(seats) != 1 {
		t.Fatalf("seats %v, %v", seats, err)
	}
	h.run("pool", "set", "gpu", "--capacity", "3", "--tenant-limit-for", "ci=2").want(t, ExitOK)
	if err := a.Release(testkit.Ctx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	h.claim("gpu", coordinator.WithHolder("bob"))
	end := h.currentRev(t)

	tests := []struct {
		name  string
		types string
		want  []string // type holder
	}{
		{"all", "", []string{"seat-claimed alice", "spec-changed ", "seat-released alice", "seat-claimed bob"}},
		{"claims", "seat-claimed", []string{"seat-claimed alice", "seat-claimed bob"}},
		{"two types", "seat-released,spec-changed", []string{"spec-changed ", "seat-released alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"watch", "gpu", "--rev", itoa64(from), "-o", "json"}
			if tt.types != "" {
				args = append(args, "--type", tt.types)
			}
			inv := newInvocation()
			wait := h.start(inv, args...)
			testkit.Eventually(t, 10*time.Second, "replay", func() bool { return len(lines(inv.out.String())) >= len(tt.want) })
			// Later history would follow; one more write shows nothing
			// else was due before it.
			live := h.currentRev(t)
			h.run("pool", "set", "gpu", "--capacity", "4").want(t, ExitOK)
			testkit.Eventually(t, 10*time.Second, "the stream to pass the replay", func() bool {
				return tt.types != "" || len(lines(inv.out.String())) > len(tt.want)
			})
			inv.sigs.send(t, os.Interrupt)
			r := wait()
			r.want(t, ExitOK)
			var got []string
			for _, l := range lines(r.out) {
				var ev eventView
				if err := json.Unmarshal([]byte(l), &ev); err != nil {
					t.Fatal(err)
				}
				if ev.Revision > end {
					if ev.Revision > live && ev.TimeSource == timeReplayed {
						t.Errorf("a live event is marked replayed: %+v", ev)
					}
					continue
				}
				got = append(got, ev.Type+" "+ev.Holder)
				switch ev.Type {
				case "seat-claimed":
					if ev.Holder == "alice" && (!ev.Time.Equal(seats[0].ClaimedAt) || ev.TimeSource != timeRecord) {
						t.Errorf("alice's claim at %v (%s), her record says %v", ev.Time, ev.TimeSource, seats[0].ClaimedAt)
					}
				case "spec-changed":
					want := []specChangeView{{"capacity", "1", "3"}, {"tenantLimits.ci", "default", "2"}}
					if !reflect.DeepEqual(ev.Changes, want) || ev.TimeSource != timeReplayed || !ev.Time.Equal(testNow) {
						t.Errorf("spec-changed = %+v, want changes %v replayed at the injected clock", ev, want)
					}
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("table says what changed", func(t *testing.T) {
		inv := newInvocation()
		wait := h.start(inv, "watch", "gpu", "--rev", itoa64(from), "--type", "spec-changed")
		testkit.Eventually(t, 10*time.Second, "replay", func() bool { return strings.Contains(inv.out.String(), "tenant ci limit") })
		inv.sigs.send(t, os.Interrupt)
		r := wait()
		r.want(t, ExitOK)
		if !regexp.MustCompile(`(?m)^-\s+spec-changed\s+gpu\s+-\s+-\s+-\s+-\s+-\s+capacity 1 -> 3, tenant ci limit default -> 2$`).MatchString(r.out) {
			t.Errorf("no spec-changed row with the change in REASON:\n%s", r.out)
		}
	})
}

func TestWatchFlagErrors(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	h.claim("gpu", coordinator.WithHolder("alice"))
	compacted := etcdtest.Compact(t, h.cli)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown type", []string{"watch", "--type", "seat-claimed,seat-stolen"}, ExitUsage, `--type "seat-stolen": want one of pool-created, `},
		{"negative rev", []string{"watch", "--rev", "-3"}, ExitUsage, "--rev -3: want a revision of 1 or more"},
		{"compacted rev", []string{"watch", "gpu", "--rev", "2"}, ExitError,
			"--rev 2: revision 2 was compacted: etcd keeps history after revision " + itoa64(compacted) + " only (use --rev " + itoa64(compacted+1) + " or later, or no --rev)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...)
			r.want(t, tt.code)
			if !strings.Contains(r.err, tt.msg) {
				t.Errorf("stderr %q, want %q", r.err, tt.msg)
			}
		})
	}
}

// TestWatchMatchesCoordinator: poolctl watch decodes etcd's events itself
// (watch_translate.go); for every kind of change it must say what
// coordinator.Watch says.
func TestWatchMatchesCoordinator(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	coordEvents := h.c.Watch(ctx, "")
	inv, wait := h.startWatch(t, "gpu", "-o", "json")

	agent := h.session(10 * time.Second)
	if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "gpu", agent.Lease(), coordinator.Instance{ID: "node-0", Seats: 2}); err != nil {
		t.Fatal(err)
	}
	a := h.claim("gpu", coordinator.WithHolder("alice"), coordinator.WithTenant("ci"))
	h.wait(t, "gpu", "bob")
	if _, err := h.c.ForceRelease(testkit.Ctx(t, 5*time.Second), "gpu", a.Seat(), a.Token(), "stuck"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "bob's grant", func() bool { s, _ := h.c.Seats(ctx, "gpu"); return len(s) == 1 })
	h.run("pool", "set", "gpu", "--capacity", "2").want(t, ExitOK)
	h.claim("gpu", coordinator.WithHolder("carol"), coordinator.WithInstance("node-0"))
	h.run("drain", "gpu", "node-0").want(t, ExitOK)
	etcdtest.Revoke(t, h.cli, agent.Lease()) // instance down
	h.run("pool", "delete", "gpu", "--force").want(t, ExitOK)
	testkit.Eventually(t, 10*time.Second, "pool-deleted", func() bool { return strings.Contains(inv.out.String(), "pool-deleted") })
	inv.sigs.send(t, os.Interrupt)
	r := wait()
	r.want(t, ExitOK)

	type key struct {
		Type, Pool, Holder, Tenant, Instance, Reason string
		Seat                                         int
		Token, Revision                              int64
	}
	var got []key
	for _, l := range lines(r.out) {
		var ev eventView
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, key{ev.Type, ev.Pool, ev.Holder, ev.Tenant, ev.Instance, ev.Reason, ev.Seat, ev.Token, ev.Revision})
	}
	var want []key
	for len(want) < len(got) {
		select {
		case ev := <-coordEvents:
			if ev.Revision >= got[0].Revision {
				want = append(want, key{string(ev.Type), ev.Pool, ev.Holder, ev.Tenant, ev.Instance, ev.Reason, ev.Seat, ev.Token, ev.Revision})
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("coordinator.Watch gave %d events, poolctl %d", len(want), len(got))
		}
	}
	kinds := map[string]bool{}
	for _, k := range got {
		kinds[k.Type] = true
	}
	if !reflect.DeepEqual(got, want) || len(kinds) < 10 {
		t.Errorf("poolctl watch (%d kinds):\n%v\ncoordinator.Watch:\n%v", len(kinds), got, want)
	}
}
