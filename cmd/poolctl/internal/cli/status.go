package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// statusOptions is status.
type statusOptions struct {
	g     *globalOptions
	Watch bool // -w: again after every change
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	o := &statusOptions{g: g}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every pool's capacity, held, free and waiting seats with a utilization bar",
		Args:  exactArgs(),
		RunE:  runE(o),
	}
	addWatchFlag(cmd, &o.Watch)
	return cmd
}

// Complete implements command.
func (o *statusOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate implements command.
func (o *statusOptions) Validate() error { return nil }

// Run implements command.
func (o *statusOptions) Run(ctx context.Context) error {
	return o.g.view(ctx, o.Watch, "", func(ctx context.Context, c *coordinator.Coordinator) (frame, error) {
		pools, err := c.ListPools(ctx)
		if err != nil {
			return nil, err
		}
		return func(time.Time) Result {
			v := poolListViewOf(pools)
			h, rows := statusTable(v)
			wh, wrows := statusWide(pools)
			return o.g.withWide(Result{Data: v, Header: h, Rows: rows}, wh, wrows)
		}, nil
	})
}

// statusTable is the table of status.
func statusTable(v poolListView) (header []string, rows [][]string) {
	header = []string{"POOL", "CAPACITY", "HELD", "FREE", "WAITING", "INSTANCES", "UTILIZATION"}
	for _, p := range v.Pools {
		capacity, free, util := itoa(p.Capacity), itoa(p.Free), bar(p.Held, p.Capacity)
		if p.SpecError != "" {
			capacity, free, util = "?", "?", "invalid spec: "+p.SpecError
		}
		rows = append(rows, []string{p.Name, capacity, itoa(p.Held), free, itoa(p.Waiting), itoa(p.Instances), util})
	}
	return header, rows
}
