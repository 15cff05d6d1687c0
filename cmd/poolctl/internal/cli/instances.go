package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// instancesOptions is instances.
type instancesOptions struct {
	g    *globalOptions
	Pool string
}

func newInstancesCommand(g *globalOptions) *cobra.Command {
	o := &instancesOptions{g: g}
	return &cobra.Command{
		Use:               "instances POOL",
		Short:             "List a pool's registered instances with their state and load",
		Args:              exactArgs("POOL"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
}

// Complete implements command.
func (o *instancesOptions) Complete(_ *cobra.Command, args []string) error {
	o.Pool = args[0]
	return nil
}

// Validate implements command.
func (o *instancesOptions) Validate() error { return checkName("pool", o.Pool) }

// Run implements command.
func (o *instancesOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		ins, err := c.Instances(ctx, o.Pool)
		if err != nil {
			return err
		}
		seats, err := c.Seats(ctx, o.Pool)
		if err != nil {
			return err
		}
		v := instanceListViewOf(o.Pool, ins, seats)
		h, rows := instancesTable(v)
		wh, wrows := instancesWide(ins)
		return o.g.printer().Print(o.g.withWide(Result{Data: v, Header: h, Rows: rows}, wh, wrows))
	})
}

// instanceListViewOf renders instances for JSON/YAML, counting the seats
// bound to each.
func instanceListViewOf(pool string, ins []coordinator.Instance, seats []coordinator.Seat) instanceListView {
	held := map[string]int{}
	for _, s := range seats {
		held[s.Instance]++
	}
	v := instanceListView{Pool: pool, Instances: make([]instanceView, 0, len(ins))}
	for _, in := range ins {
		v.Instances = append(v.Instances, instanceView{
			ID: in.ID, State: string(in.State), Seats: in.Seats, Held: held[in.ID], Addr: in.Addr,
			Labels: nonNil(in.Labels), Agent: in.Agent, Lease: leaseHex(in.Lease),
		})
	}
	return v
}

// instancesTable is the table of instances.
func instancesTable(v instanceListView) (header []string, rows [][]string) {
	header = []string{"INSTANCE", "STATE", "SEATS", "ADDR", "LABELS", "AGENT"}
	for _, in := range v.Instances {
		rows = append(rows, []string{in.ID, in.State, fmt.Sprintf("%d/%d", in.Held, in.Seats),
			dash(in.Addr), kvCell(in.Labels), dash(in.Agent)})
	}
	return header, rows
}
