package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// poolGetOptions is pool get.
type poolGetOptions struct {
	g    *globalOptions
	Name string
}

func newPoolGetCommand(g *globalOptions) *cobra.Command {
	o := &poolGetOptions{g: g}
	return &cobra.Command{
		Use:               "get NAME",
		Short:             "Show a pool's spec",
		Args:              exactArgs("NAME"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
}

// Complete implements command.
func (o *poolGetOptions) Complete(_ *cobra.Command, args []string) error {
	o.Name = args[0]
	return nil
}

// Validate implements command.
func (o *poolGetOptions) Validate() error { return checkName("pool", o.Name) }

// Run implements command.
func (o *poolGetOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		p, err := c.GetPool(ctx, o.Name)
		if err != nil {
			return err
		}
		v := poolViewOf(p)
		h, rows := poolTable(v)
		return o.g.printer().Print(Result{Data: v, Header: h, Rows: rows})
	})
}
