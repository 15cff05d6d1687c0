package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestRelease(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 4})
	seat := func(cl *coordinator.Claim) string { return fmt.Sprint(cl.Seat()) }
	held := func(t *testing.T, cl *coordinator.Claim) {
		t.Helper()
		s, err := h.c.Seat(testkit.Ctx(t, 5*time.Second), "gpu", cl.Seat())
		if err != nil || s.Token != cl.Token() {
			t.Fatalf("seat %d is no longer held under token %d: %+v %v", cl.Seat(), cl.Token(), s, err)
		}
	}
	lost := func(t *testing.T, cl *coordinator.Claim, reason string) {
		t.Helper()
		select {
		case <-cl.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("holder did not learn of the release")
		}
		if !errors.Is(cl.Err(), coordinator.ErrForceReleased) || !strings.Contains(cl.Err().Error(), reason) {
			t.Fatalf("holder's Err = %v, want ErrForceReleased with %q", cl.Err(), reason)
		}
	}
	t.Run("token", func(t *testing.T) {
		cl := h.claim("gpu", coordinator.WithHolder("alice"), coordinator.WithTenant("ci"))
		r := h.run("release", "gpu", seat(cl), "--token", fmt.Sprint(cl.Token()), "--reason", "stuck job", "-o", "json")
		r.want(t, ExitOK)
		var v releaseView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatal(err)
		}
		want := releaseView{Pool: "gpu", Seat: cl.Seat(), Token: cl.Token(), Holder: "alice", Tenant: "ci", Reason: "stuck job"}
		if v != want {
			t.Errorf("json = %+v, want %+v", v, want)
		}
		lost(t, cl, "stuck job")
	})
	t.Run("stale token changes nothing", func(t *testing.T) {
		cl := h.claim("gpu")
		h.run("release", "gpu", seat(cl), "--token", fmt.Sprint(cl.Token()-1)).want(t, ExitConflict)
		held(t, cl)
	})
	t.Run("force", func(t *testing.T) {
		cl := h.claim("gpu", coordinator.WithHolder("bob"))
		r := h.run("release", "gpu", seat(cl), "--force", "--reason", "drain")
		r.want(t, ExitOK)
		want := fmt.Sprintf("released seat %d of pool \"gpu\": token %d, holder bob, tenant -, instance -\n", cl.Seat(), cl.Token())
		if r.out != want {
			t.Errorf("output %q, want %q", r.out, want)
		}
		lost(t, cl, "drain")
	})
}

// TestReleaseRefused checks that bad input and missing seats change nothing.
func TestReleaseRefused(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 4})
	cl := h.claim("gpu")
	seat := fmt.Sprint(cl.Seat())
	free := fmt.Sprint((cl.Seat() + 1) % 4)
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"malformed token", []string{"gpu", seat, "--token", "abc"}, ExitUsage},
		{"zero token", []string{"gpu", seat, "--token", "0"}, ExitUsage},
		{"neither token nor force", []string{"gpu", seat}, ExitUsage},
		{"both token and force", []string{"gpu", seat, "--force", "--token", "5"}, ExitUsage},
		{"bad seat", []string{"gpu", "first", "--force"}, ExitUsage},
		{"negative seat", []string{"gpu", "-1", "--force"}, ExitUsage},
		{"free seat", []string{"gpu", free, "--force"}, ExitNotFound},
		{"free seat with token", []string{"gpu", free, "--token", "5"}, ExitNotFound},
		{"unknown pool", []string{"nope", "0", "--force"}, ExitNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.run(append([]string{"release"}, tt.args...)...).want(t, tt.code)
			s, err := h.c.Seat(testkit.Ctx(t, 5*time.Second), "gpu", cl.Seat())
			if err != nil || s.Token != cl.Token() {
				t.Fatalf("seat %d is no longer held under token %d: %+v %v", cl.Seat(), cl.Token(), s, err)
			}
		})
	}
}

func TestDrain(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 2})
	agent := h.session(10 * time.Second)
	ctx := testkit.Ctx(t, 10*time.Second)
	if _, err := h.c.RegisterInstance(ctx, "gpu", agent.Lease(), coordinator.Instance{ID: "node-1"}); err != nil {
		t.Fatal(err)
	}
	state := func() coordinator.InstanceState {
		ins, err := h.c.Instances(ctx, "gpu")
		if err != nil || len(ins) != 1 {
			t.Fatalf("instances: %v %v", ins, err)
		}
		return ins[0].State
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		state coordinator.InstanceState
		out   string
	}{
		{"drain", []string{"drain", "gpu", "node-1"}, ExitOK, coordinator.InstanceDraining, "instance \"node-1\" of pool \"gpu\" is draining\n"},
		{"drain again", []string{"drain", "gpu", "node-1"}, ExitOK, coordinator.InstanceDraining, "instance \"node-1\" of pool \"gpu\" is draining\n"},
		{"undrain", []string{"undrain", "gpu", "node-1", "-o", "json"}, ExitOK, coordinator.InstanceReady,
			"{\n  \"pool\": \"gpu\",\n  \"instance\": \"node-1\",\n  \"state\": \"ready\"\n}\n"},
		{"unknown instance", []string{"drain", "gpu", "node-9"}, ExitNotFound, coordinator.InstanceReady, ""},
		{"unknown pool", []string{"drain", "nope", "node-1"}, ExitNotFound, coordinator.InstanceReady, ""},
		{"missing instance", []string{"drain", "gpu"}, ExitUsage, coordinator.InstanceReady, ""},
		{"bad instance name", []string{"undrain", "gpu", "no/de"}, ExitUsage, coordinator.InstanceReady, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...)
			r.want(t, tt.code)
			if r.out != tt.out {
				t.Errorf("output %q, want %q", r.out, tt.out)
			}
			if got := state(); got != tt.state {
				t.Errorf("state %s, want %s", got, tt.state)
			}
		})
	}
	t.Run("draining admits no claim", func(t *testing.T) {
		h.run("drain", "gpu", "node-1").want(t, ExitOK)
		s := h.session(10 * time.Second)
		if _, err := h.c.Claim(ctx, s, "gpu"); !errors.Is(err, coordinator.ErrNoSeat) {
			t.Fatalf("claim on a drained instance: %v, want ErrNoSeat", err)
		}
	})
}
