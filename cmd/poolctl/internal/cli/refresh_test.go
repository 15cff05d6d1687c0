package cli

import (
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

var separatorRE = regexp.MustCompile(`(?m)^--- \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, after revision \d+$`)

// TestRefresh runs -w on each view in each mode: it prints once, prints
// nothing more while nothing changes (no polling), prints again after a
// change, and ends with exit 0 on Ctrl-C.
func TestRefresh(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		terminal bool
		frames   func(out string) int           // frames printed so far
		change   func(t *testing.T, h *harness) // what makes the next frame
		landed   func(out string) bool          // the change's frame is out
		after    func(t *testing.T, out string)
	}{
		{
			name: "seats table, not a terminal", args: []string{"seats", "gpu", "-w"},
			frames: func(out string) int { return strings.Count(out, "SEAT   HOLDER") },
			change: func(t *testing.T, h *harness) { h.claim("gpu", coordinator.WithHolder("alice")) },
			landed: func(out string) bool { return strings.Contains(out, "alice") },
			after: func(t *testing.T, out string) {
				if n := len(separatorRE.FindAllString(out, -1)); n != strings.Count(out, "SEAT   HOLDER")-1 {
					t.Errorf("%d separators for %d tables:\n%s", n, strings.Count(out, "SEAT   HOLDER"), out)
				}
				if strings.Contains(out, clearScreen) || !strings.Contains(out, "alice") {
					t.Errorf("want tables one after another, the last with alice:\n%q", out)
				}
			},
		},
		{
			name: "queue json lines", args: []string{"queue", "gpu", "-w", "-o", "json"},
			frames: func(out string) int { return strings.Count(out, "\n") },
			change: func(t *testing.T, h *harness) {
				h.claim("gpu", coordinator.WithHolder("filler-1"))
				h.claim("gpu", coordinator.WithHolder("filler-2"))
				h.wait(t, "gpu", "bob")
			},
			landed: func(out string) bool { l := lines(out); return strings.Contains(l[len(l)-1], `"bob"`) },
			after: func(t *testing.T, out string) {
				var last queueView
				for _, l := range lines(out) {
					if err := json.Unmarshal([]byte(l), &last); err != nil {
						t.Fatalf("not one JSON document per line: %q: %v", l, err)
					}
				}
				if len(last.Waiters) != 1 || last.Waiters[0].Holder != "bob" {
					t.Errorf("last document %+v, want bob waiting", last)
				}
			},
		},
		{
			name: "status in place on a terminal", args: []string{"status", "-w", "-o", "wide"}, terminal: true,
			frames: func(out string) int { return strings.Count(out, clearScreen) },
			change: func(t *testing.T, h *harness) { h.createPool("new", coordinator.PoolSpec{Capacity: 5}) },
			landed: func(out string) bool {
				return regexp.MustCompile(`(?m)^new\s+5\s+0\s+5\s`).MatchString(out[strings.LastIndex(out, clearScreen):])
			},
			after: func(t *testing.T, out string) {
				frames := strings.Split(out, clearScreen)
				last := frames[len(frames)-1]
				if frames[0] != "" || !strings.HasPrefix(last, "Every change; updated ") || !strings.Contains(last, "after revision") ||
					!strings.Contains(last, "SPEC-REVISION") {
					t.Errorf("want every frame drawn after a clear, the last with the status line and pool new:\n%q", out)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each on its own etcd: about 2 s each, mostly waiting
			h := newHarness(t)
			h.createPool("gpu", coordinator.PoolSpec{Capacity: 2})
			inv := newInvocation()
			if tt.terminal {
				inv.env.IsTerminal = func(w io.Writer) bool { return w == inv.out }
			}
			wait := h.start(inv, tt.args...)
			testkit.Eventually(t, 10*time.Second, "first frame", func() bool { return tt.frames(inv.out.String()) == 1 })
			// Nothing changes: no new frame, though a terminal's clock ticks.
			testkit.Consistently(t, refreshTick+300*time.Millisecond, "no frame without a change", func() bool {
				return tt.frames(inv.out.String()) == 1
			})
			tt.change(t, h)
			testkit.Eventually(t, 10*time.Second, "the change's frame", func() bool { return tt.landed(inv.out.String()) })
			inv.sigs.send(t, os.Interrupt)
			r := wait()
			r.want(t, ExitOK)
			if r.err != "" {
				t.Errorf("stderr: %s", r.err)
			}
			tt.after(t, r.out)
		})
	}
}

// TestRefreshEnds: -w fails like the plain view on a bad pool, and ends
// with exit 5 when its pool is deleted.
func TestRefreshEnds(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	h.run("seats", "nope", "-w").want(t, ExitNotFound)
	h.run("queue", "a/b", "-w").want(t, ExitUsage)
	inv := newInvocation()
	wait := h.start(inv, "queue", "gpu", "-w")
	testkit.Eventually(t, 10*time.Second, "first frame", func() bool { return strings.Contains(inv.out.String(), "POSITION") })
	h.run("pool", "delete", "gpu").want(t, ExitOK)
	r := wait()
	r.want(t, ExitNotFound)
	if !strings.Contains(r.err, `pool not found: "gpu"`) {
		t.Errorf("stderr %q, want pool not found", r.err)
	}
}
