package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/coordinator"
)

// TestPoolSpecAgreesWithPoolctl: a pool in the agent's YAML is judged by
// coordinator.PoolSpec.Validate and nothing else, so it is accepted or
// refused exactly as `poolctl pool create` (which also calls only
// PoolSpec.Validate; see cmd/poolctl's TestPoolCreate) treats the same
// spec. The cases are the ones where the two used to disagree.
func TestPoolSpecAgreesWithPoolctl(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		spec coordinator.PoolSpec
	}{
		{"tenant limit above capacity", "capacity: 2\n    tenantLimit: 5", coordinator.PoolSpec{Capacity: 2, TenantLimit: 5}},
		{"tenant limit negative", "capacity: 2\n    tenantLimit: -1", coordinator.PoolSpec{Capacity: 2, TenantLimit: -1}},
		{"capacity zero", "capacity: 0", coordinator.PoolSpec{}},
		{"seat ttl short", "capacity: 1\n    seatTTL: 1s", coordinator.PoolSpec{Capacity: 1, SeatTTLSeconds: 1}},
		{"every field", "capacity: 3\n    seatTTL: 30s\n    tenantLimit: 1\n    requireInstance: true",
			coordinator.PoolSpec{Capacity: 3, SeatTTLSeconds: 30, TenantLimit: 1, RequireInstance: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.yaml")
			doc := "agent:\n  instances: [{pool: p, id: i}]\n  pools:\n  - name: p\n    " + tc.yaml + "\n"
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path, ModeServe, env(nil), pflag.NewFlagSet("t", pflag.ContinueOnError))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Agent.Pools[0].Spec(); got.Capacity != tc.spec.Capacity || got.SeatTTLSeconds != tc.spec.SeatTTLSeconds ||
				got.TenantLimit != tc.spec.TenantLimit || got.RequireInstance != tc.spec.RequireInstance {
				t.Fatalf("Spec() = %+v, want %+v", got, tc.spec)
			}
			specErr, cfgErr := tc.spec.Validate(), cfg.ValidateServe()
			if (specErr == nil) != (cfgErr == nil) {
				t.Fatalf("PoolSpec.Validate = %v but config says %v", specErr, cfgErr)
			}
			var fe *FieldError
			if cfgErr != nil && (!errors.As(cfgErr, &fe) || fe.Field != "agent.pools[0]" || fe.Line != 4 ||
				!errors.Is(cfgErr, coordinator.ErrInvalid)) {
				t.Fatalf("config error %v: want a FieldError on agent.pools[0] at line 4 wrapping coordinator.ErrInvalid", cfgErr)
			}
		})
	}
	if err := checkPool("x", Pool{Name: "p", Capacity: 1, SeatTTL: Duration(2500 * time.Millisecond)}); err == nil {
		t.Fatal("a seat TTL of 2.5s was accepted; the spec stores whole seconds")
	}
}
