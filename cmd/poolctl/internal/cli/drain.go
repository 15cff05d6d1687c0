package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// drainOptions is drain and undrain: set an instance's admission state.
type drainOptions struct {
	g        *globalOptions
	state    coordinator.InstanceState
	Pool     string
	Instance string
	// Wait (drain only) waits until no seat is held on the instance.
	Wait bool
	// Timeout bounds Wait; 0 waits as long as it takes.
	Timeout time.Duration
}

func newDrainCommand(g *globalOptions, state coordinator.InstanceState) *cobra.Command {
	o := &drainOptions{g: g, state: state}
	cmd := &cobra.Command{
		Use:   "drain POOL INSTANCE",
		Short: "Stop admitting new claims to an instance; held seats stay",
		Long: "Stop admitting new claims to an instance; seats already held on it stay.\n" +
			"With --wait, wait until no seat is held on it (exit 6 if seats are still\n" +
			"held after --timeout; the instance stays draining either way).\n\n" +
			"The drain lasts as long as the instance's registration: an agent that\n" +
			"restarts, or takes the instance over, keeps it draining, but one whose\n" +
			"lease ended (stopped, or cut off past its TTL) registers it ready again.",
		Example:           "  poolctl drain demo demo-1\n  poolctl drain demo demo-1 --wait --timeout 5m",
		Args:              exactArgs("POOL", "INSTANCE"),
		RunE:              runE(o),
		ValidArgsFunction: completeArgs(g, listPools, listInstances),
	}
	if state == coordinator.InstanceReady {
		cmd.Use, cmd.Short, cmd.Long, cmd.Example = "undrain POOL INSTANCE", "Admit new claims to a drained instance again", "", ""
		return cmd
	}
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "wait until no seat is held on the instance")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "with --wait: give up (exit 6) after this long; 0 waits as long as it takes")
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
	switch {
	case o.Timeout < 0:
		return usageError("--timeout %v: must be 0 (as long as it takes) or positive", o.Timeout)
	case o.Timeout > 0 && !o.Wait:
		return usageError("--timeout needs --wait")
	}
	return checkName("instance", o.Instance)
}

// Run implements command.
func (o *drainOptions) Run(ctx context.Context) error {
	c, done, err := o.g.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	in, err := o.set(ctx, c)
	if err != nil {
		return err
	}
	text := fmt.Sprintf("instance %q of pool %q is %s", in.ID, o.Pool, in.State)
	if o.Wait {
		if err := o.waitIdle(ctx, c); err != nil {
			return err
		}
		text += "; no seat is held on it"
	}
	v := instanceStateView{Pool: o.Pool, Instance: in.ID, State: string(in.State)}
	return o.g.printer().Print(Result{Data: v, Text: text})
}

// set writes the instance's state, within --command-timeout.
func (o *drainOptions) set(ctx context.Context, c *coordinator.Coordinator) (coordinator.Instance, error) {
	ctx, cancel := o.g.withTimeout(ctx)
	defer cancel()
	if _, err := c.GetPool(ctx, o.Pool); errors.Is(err, coordinator.ErrPoolNotFound) {
		return coordinator.Instance{}, err
	}
	in, err := c.SetInstanceState(ctx, o.Pool, o.Instance, o.state)
	return in, timeoutErr(ctx, err)
}
