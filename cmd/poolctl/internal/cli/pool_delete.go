package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// poolDeleteOptions is pool delete.
type poolDeleteOptions struct {
	g     *globalOptions
	Name  string
	Force bool
}

func newPoolDeleteCommand(g *globalOptions) *cobra.Command {
	o := &poolDeleteOptions{g: g}
	cmd := &cobra.Command{
		Use:   "delete NAME [--force]",
		Short: "Delete a pool; refuses while seats are held or claimants wait, unless --force",
		Long: "Delete a pool and every key under it. Without --force it refuses (exit 3)\n" +
			"while seats are held or claimants wait. With --force, holders lose their\n" +
			"seats (poolctl run stops its command and exits 7) and waiters stop waiting.",
		Args:              exactArgs("NAME"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "delete even while seats are held or claimants wait")
	return cmd
}

// Complete implements command.
func (o *poolDeleteOptions) Complete(_ *cobra.Command, args []string) error {
	o.Name = args[0]
	return nil
}

// Validate implements command.
func (o *poolDeleteOptions) Validate() error { return checkName("pool", o.Name) }

// Run implements command.
func (o *poolDeleteOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		err := c.DeletePool(ctx, o.Name, o.Force)
		if errors.Is(err, coordinator.ErrPoolInUse) {
			return fmt.Errorf("%w; use --force to delete it anyway (holders lose their seats)", err)
		}
		if err != nil {
			return err
		}
		return o.g.printer().Print(Result{
			Data: poolDeleteView{Name: o.Name, Deleted: true, Forced: o.Force},
			Text: fmt.Sprintf("pool %q deleted", o.Name),
		})
	})
}
