package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestCompleteValues runs cobra's __complete in-process against etcd: pool
// names, instance IDs, seat numbers, -o values and watch --type values.
func TestCompleteValues(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 3})
	h.createPool("builds", coordinator.PoolSpec{Capacity: 1})
	agent := h.session(10 * time.Second)
	for i, id := range []string{"node-0", "node-1", "spare"} {
		addr := fmt.Sprintf("10.0.0.9:%d", i+1)
		if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "gpu", agent.Lease(), coordinator.Instance{ID: id, Addr: addr, Seats: 1}); err != nil {
			t.Fatal(err)
		}
	}
	a := h.claim("gpu", coordinator.WithHolder("alice"), coordinator.WithInstance("node-0"))
	b := h.claim("gpu", coordinator.WithHolder("bob"), coordinator.WithInstance("node-1"))
	seats := []string{itoa(a.Seat()) + "\talice, token " + itoa64(a.Token()), itoa(b.Seat()) + "\tbob, token " + itoa64(b.Token())}
	if b.Seat() < a.Seat() {
		seats[0], seats[1] = seats[1], seats[0] // in seat order
	}
	tests := []struct {
		name string
		args []string
		want []string // completions, with descriptions where given
	}{
		{"describe pools", []string{"describe", ""}, []string{"builds", "gpu"}},
		{"pools by prefix", []string{"queue", "g"}, []string{"gpu"}},
		{"no second pool", []string{"seats", "gpu", ""}, nil},
		{"drain instances", []string{"drain", "gpu", ""}, []string{"node-0\tready 10.0.0.9:1", "node-1\tready 10.0.0.9:2", "spare\tready 10.0.0.9:3"}},
		{"undrain instances by prefix", []string{"undrain", "gpu", "no"}, []string{"node-0\tready 10.0.0.9:1", "node-1\tready 10.0.0.9:2"}},
		{"instances of an unknown pool", []string{"drain", "nope", ""}, nil},
		{"release seats", []string{"release", "gpu", ""}, seats},
		{"run --instance", []string{"run", "gpu", "--instance", "s"}, []string{"spare\tready 10.0.0.9:3"}},
		{"-o", []string{"status", "-o", ""}, []string{"table\taligned columns", "wide\ttable with more columns",
			"json\tthe documented JSON schema", "yaml\tthe JSON schema as YAML"}},
		{"--type", []string{"watch", "--type", ""}, eventTypeNames()},
		{"--type after a comma", []string{"watch", "--type", "seat-claimed,seat-r"}, []string{"seat-claimed,seat-released"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(append([]string{"__complete"}, tt.args...)...)
			r.want(t, ExitOK)
			got := lines(r.out)
			if len(got) == 0 || !strings.HasPrefix(got[len(got)-1], ":") {
				t.Fatalf("no directive line in %q", r.out)
			}
			got = got[:len(got)-1]
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("completions\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
