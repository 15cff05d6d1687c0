package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/retry"
)

// setPolicy paces pool set's read-modify-write under contention. A
// conflict means another writer changed the spec between the read and the
// write; five tries outlast a burst of concurrent operators or scripts,
// and the jittered 20..200 ms delays let those writers separate instead of
// colliding again, while a person at a terminal barely notices them.
var setPolicy = retry.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Tries: 5}

// poolSetOptions is pool set.
type poolSetOptions struct {
	g       *globalOptions
	Name    string
	flags   specFlags
	Clear   []string // tenants whose override is removed
	changed func(string) bool
}

func newPoolSetCommand(g *globalOptions) *cobra.Command {
	o := &poolSetOptions{g: g}
	cmd := &cobra.Command{
		Use:   "set NAME [--capacity N] [--ttl D] [--tenant-limit N] [--tenant-limit-for T=N ...]",
		Short: "Change a live pool's spec; only the flags given change",
		Long: "Change a live pool's spec. poolctl reads the spec, changes only the fields\n" +
			"given, and writes it back only if nobody changed it meanwhile (retrying a\n" +
			"few times). Lowering the capacity never evicts holders: no new seat is\n" +
			"granted until fewer than the new capacity are held. A malformed spec in\n" +
			"etcd can be replaced by giving at least --capacity.",
		Example:           "  poolctl pool set gpu --capacity 8\n  poolctl pool set builds --tenant-limit-for ci=12 --clear-tenant-limit-for old",
		Args:              exactArgs("NAME"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	o.flags.add(cmd)
	cmd.Flags().StringArrayVar(&o.Clear, "clear-tenant-limit-for", nil, "remove TENANT's override, repeatable")
	return cmd
}

// Complete implements command.
func (o *poolSetOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Name = args[0]
	o.changed = cmd.Flags().Changed
	return o.flags.parse(o.changed)
}

// Validate implements command.
func (o *poolSetOptions) Validate() error {
	if err := checkName("pool", o.Name); err != nil {
		return err
	}
	for _, f := range []string{"capacity", "ttl", "tenant-limit", "tenant-limit-for", "require-instance", "clear-tenant-limit-for"} {
		if o.changed(f) {
			return nil
		}
	}
	return usageError("nothing to change: give --capacity, --ttl, --tenant-limit, --tenant-limit-for, --clear-tenant-limit-for or --require-instance")
}

// Run implements command.
func (o *poolSetOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		var old coordinator.PoolSpec
		var p coordinator.Pool
		err := retry.Do(ctx, setPolicy, func() (err error) {
			old, p, err = o.update(ctx, c)
			if err != nil && !errors.Is(err, coordinator.ErrConflict) {
				return retry.Permanent(err)
			}
			return err
		}, nil)
		if err != nil {
			return err
		}
		return o.g.printer().Print(Result{Data: poolViewOf(p), Text: fmt.Sprintf("pool %q updated: %s", o.Name, specDiff(old, p.Spec))})
	})
}

// update is one read-modify-write attempt.
func (o *poolSetOptions) update(ctx context.Context, c *coordinator.Coordinator) (old coordinator.PoolSpec, p coordinator.Pool, err error) {
	cur, err := c.GetPool(ctx, o.Name)
	if err != nil && !(errors.Is(err, coordinator.ErrBadSpec) && o.changed("capacity")) {
		return old, p, err
	}
	spec := cur.Spec
	spec.TenantLimits = maps.Clone(spec.TenantLimits)
	o.flags.apply(&spec, o.changed)
	for _, t := range o.Clear {
		delete(spec.TenantLimits, t)
	}
	if err := spec.Validate(); err != nil {
		return old, p, invalidSpec(err)
	}
	p, err = c.UpdatePool(ctx, o.Name, spec, cur.Revision)
	return cur.Spec, p, err
}

// specDiff describes what changed, field by field.
func specDiff(a, b coordinator.PoolSpec) string {
	var parts []string
	add := func(name string, x, y any) {
		if fmt.Sprint(x) != fmt.Sprint(y) {
			parts = append(parts, fmt.Sprintf("%s %v -> %v", name, x, y))
		}
	}
	add("capacity", a.Capacity, b.Capacity)
	add("seat TTL", a.SeatTTL(), b.SeatTTL())
	add("tenant limit", limitCell(a.TenantLimit), limitCell(b.TenantLimit))
	for _, t := range slices.Sorted(maps.Keys(mergeKeys(a.TenantLimits, b.TenantLimits))) {
		x, okx := a.TenantLimits[t]
		y, oky := b.TenantLimits[t]
		add("tenant "+t+" limit", overrideCell(x, okx), overrideCell(y, oky))
	}
	add("require instance", yesNo(a.RequireInstance), yesNo(b.RequireInstance))
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

func mergeKeys(a, b map[string]int) map[string]int {
	m := maps.Clone(a)
	if m == nil {
		m = map[string]int{}
	}
	maps.Copy(m, b)
	return m
}

func overrideCell(n int, ok bool) string {
	if !ok {
		return "default"
	}
	return itoa(n)
}
