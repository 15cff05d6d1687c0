package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestPoolCreate(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name string
		args []string
		code int
		spec *coordinator.PoolSpec // what etcd holds afterwards; nil: no pool
	}{
		{"minimal", []string{"pool", "create", "a", "--capacity", "2"}, ExitOK, &coordinator.PoolSpec{Capacity: 2}},
		{"every field", []string{"pool", "create", "b", "--capacity", "5", "--ttl", "30s", "--tenant-limit", "2",
			"--tenant-limit-for", "ci=4", "--tenant-limit-for", "adhoc=0", "--require-instance"}, ExitOK,
			&coordinator.PoolSpec{Capacity: 5, SeatTTLSeconds: 30, TenantLimit: 2, TenantLimits: map[string]int{"ci": 4, "adhoc": 0}, RequireInstance: true}},
		{"exists", []string{"pool", "create", "a", "--capacity", "3"}, ExitConflict, &coordinator.PoolSpec{Capacity: 2}},
		// PoolSpec.Validate alone judges a spec: a tenant limit above the
		// capacity is allowed (it only never binds), in YAML too; see
		// config's TestPoolSpecAgreesWithPoolctl.
		{"tenant limit above capacity", []string{"pool", "create", "e", "--capacity", "2", "--tenant-limit", "5"}, ExitOK,
			&coordinator.PoolSpec{Capacity: 2, TenantLimit: 5}},
		{"tenant limit negative", []string{"pool", "create", "c", "--capacity", "2", "--tenant-limit=-1"}, ExitUsage, nil},
		{"tenant override negative", []string{"pool", "create", "c", "--capacity", "2", "--tenant-limit-for", "ci=-1"}, ExitUsage, nil},
		{"capacity zero", []string{"pool", "create", "c", "--capacity", "0"}, ExitUsage, nil},
		{"capacity negative", []string{"pool", "create", "c", "--capacity=-1"}, ExitUsage, nil},
		{"capacity missing", []string{"pool", "create", "c"}, ExitUsage, nil},
		{"capacity not a number", []string{"pool", "create", "c", "--capacity", "two"}, ExitUsage, nil},
		{"ttl too short", []string{"pool", "create", "c", "--capacity", "1", "--ttl", "1s"}, ExitUsage, nil},
		{"ttl fractional", []string{"pool", "create", "c", "--capacity", "1", "--ttl", "2500ms"}, ExitUsage, nil},
		{"bad tenant override", []string{"pool", "create", "c", "--capacity", "1", "--tenant-limit-for", "ci"}, ExitUsage, nil},
		{"bad tenant name", []string{"pool", "create", "c", "--capacity", "1", "--tenant-limit-for", "a/b=1"}, ExitUsage, nil},
		{"bad pool name", []string{"pool", "create", "c/d", "--capacity", "1"}, ExitUsage, nil},
		{"two names", []string{"pool", "create", "c", "d", "--capacity", "1"}, ExitUsage, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...)
			r.want(t, tt.code)
			name := tt.args[2]
			p, err := h.c.GetPool(testkit.Ctx(t, 5*time.Second), name)
			if tt.spec == nil {
				if !errors.Is(err, coordinator.ErrPoolNotFound) && !errors.Is(err, coordinator.ErrInvalid) {
					t.Fatalf("pool %q exists after a failed create: %v %+v", name, err, p)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(p.Spec, *tt.spec) {
				t.Fatalf("spec in etcd = %+v (%v), want %+v", p.Spec, err, *tt.spec)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		r := h.run("pool", "create", "j", "--capacity", "3", "--tenant-limit-for", "ci=1", "-o", "json")
		r.want(t, ExitOK)
		var v poolView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Name != "j" || v.Capacity != 3 || v.SeatTTLSeconds != 10 || v.TenantLimit != 0 ||
			!reflect.DeepEqual(v.TenantLimits, map[string]int{"ci": 1}) || v.RequireInstance || v.Revision <= 0 {
			t.Errorf("json = %+v", v)
		}
	})
	t.Run("table", func(t *testing.T) {
		r := h.run("pool", "create", "t", "--capacity", "3")
		r.want(t, ExitOK)
		golden(t, "pool_create", r.out)
	})
}

func TestPoolGetListStatus(t *testing.T) {
	h := newHarness(t)
	h.createPool("builds", coordinator.PoolSpec{Capacity: 20, SeatTTLSeconds: 30, TenantLimit: 5, TenantLimits: map[string]int{"ci": 10}})
	h.createPool("gpu", coordinator.PoolSpec{Capacity: 4})
	h.claim("gpu", coordinator.WithHolder("a"))
	h.claim("gpu", coordinator.WithHolder("b"))
	h.claim("gpu", coordinator.WithHolder("c"))
	// A spec written by hand with etcdctl that does not decode.
	if _, err := h.cli.Put(context.Background(), coordinator.DefaultPrefix+"/pools/broken/spec", "{"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		golden string
		mask   []string // volatile columns
	}{
		{"get", []string{"pool", "get", "builds"}, "pool_get", []string{"REVISION"}},
		{"list", []string{"pool", "list"}, "pool_list", nil},
		{"list no headers", []string{"pool", "list", "--no-headers"}, "pool_list_no_headers", nil},
		{"status", []string{"status"}, "status", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.run(tt.args...)
			r.want(t, ExitOK)
			out := r.out
			if tt.mask != nil {
				out = mask(t, out, tt.mask...)
			}
			golden(t, tt.golden, out)
		})
	}
	t.Run("get unknown", func(t *testing.T) { h.run("pool", "get", "nope").want(t, ExitNotFound) })
	t.Run("get malformed", func(t *testing.T) { h.run("pool", "get", "broken").want(t, ExitError) })
	t.Run("get json", func(t *testing.T) {
		r := h.run("pool", "get", "builds", "-o", "json")
		r.want(t, ExitOK)
		var v poolView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatal(err)
		}
		if v.Name != "builds" || v.Capacity != 20 || v.SeatTTLSeconds != 30 || v.TenantLimit != 5 || v.TenantLimits["ci"] != 10 || v.Revision <= 0 {
			t.Errorf("json = %+v", v)
		}
	})
	t.Run("status json", func(t *testing.T) {
		r := h.run("status", "-o", "json")
		r.want(t, ExitOK)
		var v poolListView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Pools) != 3 {
			t.Fatalf("pools = %+v", v.Pools)
		}
		b, g := v.Pools[0], v.Pools[2]
		if b.Name != "broken" || b.SpecError == "" || g.Name != "gpu" || g.Capacity != 4 || g.Held != 3 || g.Free != 1 ||
			g.Waiting != 0 || g.Utilization != 0.75 || g.SpecError != "" || g.SeatTTLSeconds != 10 {
			t.Errorf("json = %+v", v.Pools)
		}
	})
	t.Run("yaml", func(t *testing.T) {
		r := h.run("pool", "get", "gpu", "-o", "yaml")
		r.want(t, ExitOK)
		golden(t, "pool_get_yaml", revisionRE.ReplaceAllString(r.out, "revision: *"))
	})
}

func TestPoolSet(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 2, SeatTTLSeconds: 20, TenantLimit: 1, TenantLimits: map[string]int{"ci": 2, "old": 1}})
	tests := []struct {
		name string
		args []string
		code int
		want coordinator.PoolSpec
	}{
		{"capacity only", []string{"--capacity", "5"}, ExitOK,
			coordinator.PoolSpec{Capacity: 5, SeatTTLSeconds: 20, TenantLimit: 1, TenantLimits: map[string]int{"ci": 2, "old": 1}}},
		{"overrides", []string{"--tenant-limit-for", "ci=3", "--clear-tenant-limit-for", "old", "--require-instance"}, ExitOK,
			coordinator.PoolSpec{Capacity: 5, SeatTTLSeconds: 20, TenantLimit: 1, TenantLimits: map[string]int{"ci": 3}, RequireInstance: true}},
		{"shrink and ttl", []string{"--capacity", "1", "--ttl", "5s", "--tenant-limit", "0", "--require-instance=false"}, ExitOK,
			coordinator.PoolSpec{Capacity: 1, SeatTTLSeconds: 5, TenantLimits: map[string]int{"ci": 3}}},
		{"nothing to change", nil, ExitUsage,
			coordinator.PoolSpec{Capacity: 1, SeatTTLSeconds: 5, TenantLimits: map[string]int{"ci": 3}}},
		{"capacity zero", []string{"--capacity", "0"}, ExitUsage,
			coordinator.PoolSpec{Capacity: 1, SeatTTLSeconds: 5, TenantLimits: map[string]int{"ci": 3}}},
		{"ttl 0 is the default", []string{"--ttl", "0s"}, ExitOK,
			coordinator.PoolSpec{Capacity: 1, TenantLimits: map[string]int{"ci": 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.run(append([]string{"pool", "set", "p"}, tt.args...)...).want(t, tt.code)
			p, err := h.c.GetPool(testkit.Ctx(t, 5*time.Second), "p")
			if err != nil || !reflect.DeepEqual(p.Spec, tt.want) {
				t.Fatalf("spec = %+v (%v), want %+v", p.Spec, err, tt.want)
			}
		})
	}
	t.Run("unknown pool", func(t *testing.T) { h.run("pool", "set", "nope", "--capacity", "2").want(t, ExitNotFound) })
	t.Run("table", func(t *testing.T) {
		r := h.run("pool", "set", "p", "--capacity", "3", "--tenant-limit-for", "new=1")
		r.want(t, ExitOK)
		golden(t, "pool_set", r.out)
	})
	t.Run("repairs malformed spec", func(t *testing.T) {
		if _, err := h.cli.Put(context.Background(), coordinator.DefaultPrefix+"/pools/bad/spec", "nonsense"); err != nil {
			t.Fatal(err)
		}
		h.run("pool", "set", "bad", "--ttl", "5s").want(t, ExitError)
		h.run("pool", "set", "bad", "--capacity", "2").want(t, ExitOK)
		if p, err := h.c.GetPool(testkit.Ctx(t, 5*time.Second), "bad"); err != nil || p.Spec.Capacity != 2 {
			t.Fatalf("after repair: %+v %v", p, err)
		}
	})
}

// TestPoolSetConcurrent runs setPolicy.Tries setters at once, each adding its
// own tenant override. Every failed compare-and-swap means another setter
// succeeded, so each needs at most setPolicy.Tries attempts: all must succeed
// and no override may be lost.
func TestPoolSetConcurrent(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	var wg sync.WaitGroup
	results := make([]result, setPolicy.Tries)
	for i := range int(setPolicy.Tries) {
		wg.Go(func() {
			results[i] = h.run("pool", "set", "p", "--tenant-limit-for", fmt.Sprintf("t%d=%d", i, i+1))
		})
	}
	wg.Wait()
	want := map[string]int{}
	for i, r := range results {
		r.want(t, ExitOK)
		want[fmt.Sprintf("t%d", i)] = i + 1
	}
	p, err := h.c.GetPool(testkit.Ctx(t, 5*time.Second), "p")
	if err != nil || !reflect.DeepEqual(p.Spec.TenantLimits, want) {
		t.Fatalf("overrides = %v (%v), want %v: an update was lost", p.Spec.TenantLimits, err, want)
	}
}

func TestPoolDelete(t *testing.T) {
	h := newHarness(t)
	h.createPool("busy", coordinator.PoolSpec{Capacity: 1})
	h.createPool("idle", coordinator.PoolSpec{Capacity: 1})
	cl := h.claim("busy")
	t.Run("refuses while held", func(t *testing.T) {
		h.run("pool", "delete", "busy").want(t, ExitConflict)
		if _, err := h.c.GetPool(testkit.Ctx(t, 5*time.Second), "busy"); err != nil {
			t.Fatalf("pool gone after a refused delete: %v", err)
		}
	})
	t.Run("force", func(t *testing.T) {
		r := h.run("pool", "delete", "busy", "--force", "-o", "json")
		r.want(t, ExitOK)
		var v poolDeleteView
		if err := json.Unmarshal([]byte(r.out), &v); err != nil || v != (poolDeleteView{Name: "busy", Deleted: true, Forced: true}) {
			t.Fatalf("json = %+v (%v)", v, err)
		}
		select {
		case <-cl.Done():
			if !errors.Is(cl.Err(), coordinator.ErrPoolDeleted) {
				t.Errorf("holder lost its seat with %v, want ErrPoolDeleted", cl.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("holder did not learn of the deletion")
		}
	})
	t.Run("idle", func(t *testing.T) {
		r := h.run("pool", "delete", "idle")
		r.want(t, ExitOK)
		golden(t, "pool_delete", r.out)
	})
	t.Run("unknown", func(t *testing.T) { h.run("pool", "delete", "idle").want(t, ExitNotFound) })
	t.Run("unknown subcommand", func(t *testing.T) { h.run("pool", "frobnicate").want(t, ExitUsage) })
}
