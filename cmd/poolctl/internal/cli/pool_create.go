package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// poolCreateOptions is pool create.
type poolCreateOptions struct {
	g     *globalOptions
	Name  string
	flags specFlags
	spec  coordinator.PoolSpec
}

func newPoolCreateCommand(g *globalOptions) *cobra.Command {
	o := &poolCreateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "create NAME --capacity N",
		Short: "Create a pool",
		Example: "  poolctl pool create gpu --capacity 4\n" +
			"  poolctl pool create builds --capacity 20 --ttl 30s --tenant-limit 5 --tenant-limit-for ci=10",
		Args: exactArgs("NAME"),
		RunE: runE(o),
	}
	o.flags.add(cmd)
	_ = cmd.MarkFlagRequired("capacity")
	return cmd
}

// Complete implements command.
func (o *poolCreateOptions) Complete(cmd *cobra.Command, args []string) error {
	o.Name = args[0]
	changed := cmd.Flags().Changed
	if err := o.flags.parse(changed); err != nil {
		return err
	}
	o.flags.apply(&o.spec, changed)
	return nil
}

// Validate implements command.
func (o *poolCreateOptions) Validate() error {
	if err := checkName("pool", o.Name); err != nil {
		return err
	}
	if err := o.spec.Validate(); err != nil {
		return invalidSpec(err)
	}
	return nil
}

// Run implements command.
func (o *poolCreateOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		p, err := c.CreatePool(ctx, o.Name, o.spec)
		if errors.Is(err, coordinator.ErrPoolExists) {
			return fmt.Errorf("%w; change it with `poolctl pool set`", err)
		}
		if err != nil {
			return err
		}
		v := poolViewOf(p)
		return o.g.printer().Print(Result{Data: v, Text: fmt.Sprintf("pool %q created: capacity %d, seat TTL %ds", v.Name, v.Capacity, v.SeatTTLSeconds)})
	})
}
