package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// viewScene is pool gpu (capacity 1) with instance node-0, alice holding
// its seat and bob waiting.
type viewScene struct {
	alice *coordinator.Claim
	agent *coordinator.Session
}

func (h *harness) viewScene(t *testing.T) viewScene {
	t.Helper()
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1, TenantLimit: 2, TenantLimits: map[string]int{"ci": 1}})
	agent := h.session(10 * time.Second)
	if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "gpu", agent.Lease(), coordinator.Instance{
		ID: "node-0", Addr: "10.0.0.1:9000", Seats: 1, Labels: map[string]string{"zone": "a"}, Agent: "vm"}); err != nil {
		t.Fatal(err)
	}
	alice := h.claim("gpu", coordinator.WithHolder("alice"), coordinator.WithTenant("ci"))
	h.wait(t, "gpu", "bob")
	return viewScene{alice: alice, agent: agent}
}

// wait queues holder on pool in the background; once granted, it holds
// the seat until the test ends.
func (h *harness) wait(t *testing.T, pool, holder string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := h.session(10 * time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if cl, err := h.c.Claim(ctx, s, pool, coordinator.WithHolder(holder), coordinator.WithWait()); err == nil {
			<-ctx.Done()
			_ = cl.Release(context.Background())
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	testkit.Eventually(t, 10*time.Second, holder+" to queue", func() bool {
		ws, _ := h.c.Queue(context.Background(), pool)
		for _, w := range ws {
			if w.Holder == holder {
				return true
			}
		}
		return false
	})
}

func TestDescribe(t *testing.T) {
	h := newHarness(t)
	sc := h.viewScene(t)
	lines := func(res ...string) func(t *testing.T, out string) {
		return func(t *testing.T, out string) {
			for _, re := range res {
				if !regexp.MustCompile(`(?m)` + re).MatchString(out) {
					t.Errorf("output lacks a line matching %q:\n%s", re, out)
				}
			}
		}
	}
	decode := func(t *testing.T, out string, unmarshal func([]byte, any) error) {
		var v describeView
		if err := unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Name != "gpu" || v.Spec.Capacity != 1 || v.Spec.TenantLimits["ci"] != 1 || v.Usage != (usageView{Held: 1, Free: 0, Waiting: 1, Utilization: 1}) ||
			len(v.Instances) != 1 || v.Instances[0].ID != "node-0" || v.Instances[0].Held != 1 ||
			len(v.Seats) != 1 || v.Seats[0].Holder != "alice" || v.Seats[0].Token != sc.alice.Token() || v.Seats[0].Instance != "node-0" ||
			len(v.Waiters) != 1 || v.Waiters[0].Holder != "bob" {
			t.Errorf("describe document = %+v", v)
		}
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		check func(t *testing.T, out string)
	}{
		{"table", []string{"describe", "gpu"}, ExitOK, lines(
			`^Name:\s+gpu$`, `^Capacity:\s+1$`, `^Tenant overrides:\s+ci=1$`, `^Usage:\s+1 held, 0 free, 1 waiting\s+\[#+\] 100%$`,
			`^Instances \(1\):$`, `^  node-0\s+ready\s+1/1\s+10\.0\.0\.1:9000\s+zone=a\s+vm$`,
			`^Seats \(1 held\):$`, `^  0\s+alice\s+ci\s+node-0\s+`+itoa64(sc.alice.Token())+`\s`,
			`^Queue \(1 waiting\):$`, `^  0\s+bob\s+-\s+-\s+-\s+\S+\s+pool full: pool "gpu" holds 1 of 1$`)},
		{"wide", []string{"describe", "gpu", "-o", "wide"}, ExitOK, lines(
			`^  SEAT .* LEASE\s+CLAIMED-AT\s+INSTANCE-ADDR$`, `\s`+leaseHex(sc.alice.Lease())+`\s+\d{4}-\d\d-\d\dT\S+Z\s+10\.0\.0\.1:9000$`,
			`^  INSTANCE .* LEASE\s+REVISION$`, `\s`+leaseHex(sc.agent.Lease())+`\s+\d+$`)},
		{"json", []string{"describe", "gpu", "-o", "json"}, ExitOK, func(t *testing.T, out string) { decode(t, out, json.Unmarshal) }},
		{"yaml", []string{"describe", "gpu", "-o", "yaml"}, ExitOK, func(t *testing.T, out string) {
			decode(t, out, func(b []byte, v any) error { return yaml.Unmarshal(b, v) })
		}},
		{"unknown pool", []string{"describe", "nope"}, ExitNotFound, nil},
		{"bad name", []string{"describe", "a/b"}, ExitUsage, nil},
		{"no pool", []string{"describe"}, ExitUsage, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...)
			r.want(t, tt.code)
			if tt.check != nil {
				tt.check(t, r.out)
			}
		})
	}
}

// TestWide runs -o wide against etcd: each view gains its columns, with
// the values etcd holds, after the usual ones.
func TestWide(t *testing.T) {
	h := newHarness(t)
	sc := h.viewScene(t)
	tests := []struct {
		args   []string
		header string
		row    string // a regexp for a row
	}{
		{[]string{"status"}, "SEAT-TTL TENANT-LIMIT REQUIRE-INSTANCE SPEC-REVISION", `^gpu .* 10s\s+2\s+no\s+\d+$`},
		{[]string{"seats", "gpu"}, "LEASE CLAIMED-AT INSTANCE-ADDR", `^0\s+alice .*\s` + leaseHex(sc.alice.Lease()) + `\s+20\d\d-\S+Z\s+10\.0\.0\.1:9000$`},
		{[]string{"queue", "gpu"}, "LEASE SINCE QUEUE-REVISION", `^0\s+bob .*\s[0-9a-f]+\s+20\d\d-\S+Z\s+\d+$`},
		{[]string{"instances", "gpu"}, "LEASE REVISION", `^node-0 .*\s` + leaseHex(sc.agent.Lease()) + `\s+\d+$`},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			plain := h.run(tt.args...)
			plain.want(t, ExitOK)
			r := h.run(append(tt.args, "-o", "wide")...)
			r.want(t, ExitOK)
			head := strings.Join(strings.Fields(strings.SplitN(r.out, "\n", 2)[0]), " ")
			plainHead := strings.Join(strings.Fields(strings.SplitN(plain.out, "\n", 2)[0]), " ")
			if head != plainHead+" "+tt.header {
				t.Errorf("wide header %q, want %q + %q", head, plainHead, tt.header)
			}
			if !regexp.MustCompile(`(?m)` + tt.row).MatchString(r.out) {
				t.Errorf("no row matches %q:\n%s", tt.row, r.out)
			}
		})
	}
	t.Run("bad output", func(t *testing.T) { h.run("status", "-o", "wider").want(t, ExitUsage) })
}
