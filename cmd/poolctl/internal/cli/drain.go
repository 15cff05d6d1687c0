package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// drainOptions is drain and undrain: set an instance's admission state.
type drainOptions struct {
	g        *globalOptions
	state    coordinator.InstanceState
	Pool     string
	Instance string
}

func newDrainCommand(g *globalOptions, state coordinator.InstanceState) *cobra.Command {
	o := &drainOptions{g: g, state: state}
	cmd := &cobra.Command{
		Use:               "drain POOL INSTANCE",
		Short:             "Stop admitting new claims to an instance; held seats stay",
		Args:              exactArgs("POOL", "INSTANCE"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	if state == coordinator.InstanceReady {
		cmd.Use, cmd.Short = "undrain POOL INSTANCE", "Admit new claims to a drained instance again"
	}
	return cmd
}

// Complete implements command.
func (o *drainOptions) Complete(_ *cobra.Command, args []string) error {
	o.Pool, o.Instance = args[0], args[1]
	return nil
}

// Validate implements command.
func (o *drainOptions) Validate() error {
	if err := checkName("pool", o.Pool); err != nil {
		return err
	}
	return checkName("instance", o.Instance)
}

// Run implements command.
func (o *drainOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		if _, err := c.GetPool(ctx, o.Pool); errors.Is(err, coordinator.ErrPoolNotFound) {
			return err
		}
		in, err := c.SetInstanceState(ctx, o.Pool, o.Instance, o.state)
		if err != nil {
			return err
		}
		v := instanceStateView{Pool: o.Pool, Instance: in.ID, State: string(in.State)}
		return o.g.printer().Print(Result{Data: v, Text: fmt.Sprintf("instance %q of pool %q is %s", v.Instance, v.Pool, v.State)})
	})
}
