package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestSeats(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 3, TenantLimit: 2})
	h.createPool("empty", coordinator.PoolSpec{Capacity: 1})
	a := h.claim("gpu", coordinator.WithHolder("alice"), coordinator.WithTenant("ci"))
	b := h.claim("gpu", coordinator.WithHolder("bob"))
	t.Run("table", func(t *testing.T) {
		r := h.run("seats", "gpu")
		r.want(t, ExitOK)
		// Seats are picked at random, so rows are sorted after masking;
		// the JSON case checks which seat each holder got.
		golden(t, "seats", sortRows(mask(t, r.out, "SEAT", "TOKEN", "AGE", "LEASE-TTL")))
	})
	t.Run("json", func(t *testing.T) {
		r := h.run("seats", "gpu", "-o", "json")
		r.want(t, ExitOK)
		var v seatListView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Pool != "gpu" || len(v.Seats) != 2 {
			t.Fatalf("json = %+v", v)
		}
		byHolder := map[string]seatView{}
		for _, s := range v.Seats {
			byHolder[s.Holder] = s
		}
		for _, cl := range []*coordinator.Claim{a, b} {
			s := byHolder[cl.Holder()]
			if s.Seat != cl.Seat() || s.Token != cl.Token() || s.Tenant != cl.Tenant() || s.Lease != leaseHex(cl.Lease()) ||
				s.Instance != "" || s.TTLSeconds < 1 || s.TTLSeconds > 10 || s.ClaimedAt.IsZero() ||
				s.AgeSeconds != int64(testNow.Sub(s.ClaimedAt)/time.Second) {
				t.Errorf("seat of %s = %+v, want seat %d token %d lease %s", cl.Holder(), s, cl.Seat(), cl.Token(), leaseHex(cl.Lease()))
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		r := h.run("seats", "empty", "-o", "json")
		r.want(t, ExitOK)
		if r.out != "{\n  \"pool\": \"empty\",\n  \"seats\": []\n}\n" {
			t.Errorf("empty list = %q, want seats: []", r.out)
		}
	})
	t.Run("unknown pool", func(t *testing.T) { h.run("seats", "nope").want(t, ExitNotFound) })
	t.Run("bad name", func(t *testing.T) { h.run("seats", "a b").want(t, ExitUsage) })
	t.Run("no pool", func(t *testing.T) { h.run("seats").want(t, ExitUsage) })
}

func TestInstances(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 4})
	agent := h.session(10 * time.Second)
	ctx := testkit.Ctx(t, 10*time.Second)
	for _, in := range []coordinator.Instance{
		{ID: "node-1", Addr: "10.0.0.1:9000", Seats: 2, Labels: map[string]string{"zone": "a"}, Agent: "agent-1"},
		{ID: "node-2", Seats: 1, State: coordinator.InstanceDraining},
	} {
		if _, err := h.c.RegisterInstance(ctx, "gpu", agent.Lease(), in); err != nil {
			t.Fatal(err)
		}
	}
	h.claim("gpu", coordinator.WithInstance("node-1"))
	t.Run("table", func(t *testing.T) {
		r := h.run("instances", "gpu")
		r.want(t, ExitOK)
		golden(t, "instances", r.out)
	})
	t.Run("json", func(t *testing.T) {
		r := h.run("instances", "gpu", "-o", "json")
		r.want(t, ExitOK)
		var v instanceListView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Pool != "gpu" || len(v.Instances) != 2 {
			t.Fatalf("json = %+v", v)
		}
		n1, n2 := v.Instances[0], v.Instances[1]
		if n1.ID != "node-1" || n1.State != "ready" || n1.Seats != 2 || n1.Held != 1 || n1.Addr != "10.0.0.1:9000" ||
			n1.Labels["zone"] != "a" || n1.Agent != "agent-1" || n1.Lease != leaseHex(agent.Lease()) {
			t.Errorf("node-1 = %+v", n1)
		}
		if n2.ID != "node-2" || n2.State != "draining" || n2.Held != 0 || n2.Labels == nil {
			t.Errorf("node-2 = %+v", n2)
		}
	})
	t.Run("unknown pool", func(t *testing.T) { h.run("instances", "nope").want(t, ExitNotFound) })
}

func TestQueue(t *testing.T) {
	h := newHarness(t)
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 1})
	agent := h.session(10 * time.Second)
	in := coordinator.Instance{ID: "node-1", Seats: 3, Labels: map[string]string{"zone": "a"}}
	if _, err := h.c.RegisterInstance(testkit.Ctx(t, 5*time.Second), "gpu", agent.Lease(), in); err != nil {
		t.Fatal(err)
	}
	h.claim("gpu", coordinator.WithHolder("holder"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	wait := func(holder string, opts ...coordinator.ClaimOption) {
		s := h.session(10 * time.Second)
		go func() {
			_, err := h.c.Claim(ctx, s, "gpu", append(opts, coordinator.WithHolder(holder), coordinator.WithWait())...)
			errs <- err
		}()
	}
	queued := func(n int) func() bool {
		return func() bool { ws, err := h.c.Queue(ctx, "gpu"); return err == nil && len(ws) == n }
	}
	wait("first", coordinator.WithTenant("ci"))
	testkit.Eventually(t, 10*time.Second, "first waiter", queued(1))
	wait("second", coordinator.WithLabels(map[string]string{"zone": "a"}))
	testkit.Eventually(t, 10*time.Second, "second waiter", queued(2))
	t.Run("table", func(t *testing.T) {
		r := h.run("queue", "gpu")
		r.want(t, ExitOK)
		golden(t, "queue", mask(t, r.out, "WAITED"))
	})
	t.Run("json", func(t *testing.T) {
		r := h.run("queue", "gpu", "-o", "json")
		r.want(t, ExitOK)
		var v queueView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Pool != "gpu" || len(v.Waiters) != 2 {
			t.Fatalf("json = %+v", v)
		}
		w0, w1 := v.Waiters[0], v.Waiters[1]
		if w0.Position != 0 || w0.Holder != "first" || w0.Tenant != "ci" || w1.Position != 1 || w1.Holder != "second" ||
			w1.Labels["zone"] != "a" || w0.Lease == "" || w0.Since.After(w1.Since) ||
			w0.WaitedSeconds != int64(testNow.Sub(w0.Since)/time.Second) {
			t.Errorf("waiters = %+v", v.Waiters)
		}
	})
	t.Run("unknown pool", func(t *testing.T) { h.run("queue", "nope").want(t, ExitNotFound) })
	cancel()
	for range 2 {
		<-errs
	}
}
