package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// poolListOptions is pool list.
type poolListOptions struct{ g *globalOptions }

func newPoolListCommand(g *globalOptions) *cobra.Command {
	o := &poolListOptions{g: g}
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List pools with their specs",
		Args:    exactArgs(),
		RunE:    runE(o),
	}
}

// Complete implements command.
func (o *poolListOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate implements command.
func (o *poolListOptions) Validate() error { return nil }

// Run implements command.
func (o *poolListOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		pools, err := c.ListPools(ctx)
		if err != nil {
			return err
		}
		v := poolListViewOf(pools)
		h, rows := poolListTable(v)
		return o.g.printer().Print(Result{Data: v, Header: h, Rows: rows})
	})
}

// poolListViewOf renders pool summaries for JSON/YAML (pool list, status).
func poolListViewOf(pools []coordinator.PoolStatus) poolListView {
	v := poolListView{Pools: make([]poolStatusView, 0, len(pools))}
	for _, p := range pools {
		s := poolStatusView{
			Name: p.Name, Capacity: p.Spec.Capacity, TenantLimit: p.Spec.TenantLimit,
			RequireInstance: p.Spec.RequireInstance, Held: p.Held, Free: p.Free, Waiting: p.Waiting,
			Instances: p.Instances, SpecError: Message(errString(p.SpecError)),
		}
		if p.SpecError == "" {
			s.SeatTTLSeconds = int64(p.Spec.SeatTTL().Seconds())
		}
		if s.Capacity > 0 {
			s.Utilization = float64(s.Held) / float64(s.Capacity)
		}
		v.Pools = append(v.Pools, s)
	}
	return v
}

// poolListTable is the table of pool list.
func poolListTable(v poolListView) (header []string, rows [][]string) {
	header = []string{"NAME", "CAPACITY", "SEAT-TTL", "TENANT-LIMIT", "REQUIRE-INSTANCE", "HELD", "WAITING"}
	for _, p := range v.Pools {
		if p.SpecError != "" {
			// `poolctl pool get NAME` and `poolctl status` show the error.
			rows = append(rows, []string{p.Name, "?", "?", "?", "?", itoa(p.Held), itoa(p.Waiting)})
			continue
		}
		rows = append(rows, []string{p.Name, itoa(p.Capacity), itoa64(p.SeatTTLSeconds) + "s",
			limitCell(p.TenantLimit), yesNo(p.RequireInstance), itoa(p.Held), itoa(p.Waiting)})
	}
	return header, rows
}

// errString lets Message clean a stored error string.
type errString string

func (e errString) Error() string { return string(e) }
