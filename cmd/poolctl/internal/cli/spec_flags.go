package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// specFlags are the pool spec fields shared by pool create and pool set.
type specFlags struct {
	Capacity        int
	TTL             time.Duration
	TenantLimit     int
	TenantLimitFor  []string
	RequireInstance bool

	overrides map[string]int // parsed TenantLimitFor
}

func (f *specFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.Capacity, "capacity", 0, "seats that may be held at once (1.."+itoa(coordinator.MaxCapacity)+")")
	fl.DurationVar(&f.TTL, "ttl", 0, fmt.Sprintf("seat TTL claimants should use, whole seconds in %v..%v; 0 means the default, %v", coordinator.MinTTL, coordinator.MaxTTL, coordinator.DefaultSeatTTL))
	fl.IntVar(&f.TenantLimit, "tenant-limit", 0, "seats one tenant may hold; 0 means no limit")
	fl.StringArrayVar(&f.TenantLimitFor, "tenant-limit-for", nil, "per-tenant limit as TENANT=N, repeatable; N=0 denies the tenant")
	fl.BoolVar(&f.RequireInstance, "require-instance", false, "bind every claim to a registered instance")
}

// parse reads the flags a user gave; changed tells which. It checks only
// what a flag's text must be to mean a spec field (--ttl in whole seconds,
// --tenant-limit-for as TENANT=N); whether the spec it makes is valid is
// for coordinator.PoolSpec.Validate alone to judge.
func (f *specFlags) parse(changed func(string) bool) error {
	if changed("ttl") && f.TTL%time.Second != 0 {
		return usageError("--ttl %v: must be whole seconds (the spec stores seconds)", f.TTL)
	}
	f.overrides = map[string]int{}
	for _, kv := range f.TenantLimitFor {
		t, n, err := parseTenantLimit(kv)
		if err != nil {
			return err
		}
		f.overrides[t] = n
	}
	return nil
}

// invalidSpec reports a spec that PoolSpec.Validate refused, as bad usage
// of the flags that made it.
func invalidSpec(err error) error {
	return classify(errUsage, fmt.Errorf("the pool spec the flags make is invalid: %w", err))
}

func parseTenantLimit(kv string) (string, int, error) {
	t, v, ok := strings.Cut(kv, "=")
	n, err := strconv.Atoi(v)
	if !ok || t == "" || err != nil {
		return "", 0, usageError("--tenant-limit-for %q: want TENANT=N", kv)
	}
	return t, n, nil
}

// apply writes the changed fields into spec.
func (f *specFlags) apply(spec *coordinator.PoolSpec, changed func(string) bool) {
	if changed("capacity") {
		spec.Capacity = f.Capacity
	}
	if changed("ttl") {
		spec.SeatTTLSeconds = int64(f.TTL / time.Second)
	}
	if changed("tenant-limit") {
		spec.TenantLimit = f.TenantLimit
	}
	if len(f.overrides) > 0 {
		m := make(map[string]int, len(spec.TenantLimits)+len(f.overrides))
		for t, n := range spec.TenantLimits {
			m[t] = n
		}
		for t, n := range f.overrides {
			m[t] = n
		}
		spec.TenantLimits = m
	}
	if changed("require-instance") {
		spec.RequireInstance = f.RequireInstance
	}
}

func itoa(n int) string     { return strconv.Itoa(n) }
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
