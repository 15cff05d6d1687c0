package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// releaseOptions is release.
type releaseOptions struct {
	g      *globalOptions
	Pool   string
	Seat   int
	Token  string
	Force  bool
	Reason string

	token int64
}

func newReleaseCommand(g *globalOptions) *cobra.Command {
	o := &releaseOptions{g: g}
	cmd := &cobra.Command{
		Use:   "release POOL SEAT (--token T | --force) [--reason R]",
		Short: "Force-release a held seat, fenced by its token",
		Long: "Force-release a seat on an operator's behalf. With --token it frees the seat\n" +
			"only if it is still held under that token (the TOKEN column of `poolctl seats`);\n" +
			"a stale token changes nothing and exits 3. With --force it reads the current\n" +
			"token first and releases whoever holds the seat now.\n\n" +
			"The holder learns of the loss at once: `poolctl run` stops its command and\n" +
			"exits 7. A holder that is paused or cut off may keep working until its own\n" +
			"fenced writes fail.",
		Example: "  poolctl release gpu 1 --token 8812 --reason 'stuck job'\n  poolctl release gpu 1 --force",
		Args:    exactArgs("POOL", "SEAT"),
		RunE:    runE(o),

		ValidArgsFunction: completeArgs(g, listPools, listSeats),
	}
	f := cmd.Flags()
	f.StringVar(&o.Token, "token", "", "release only if the seat is held under this fencing token")
	f.BoolVar(&o.Force, "force", false, "release whoever holds the seat now")
	f.StringVar(&o.Reason, "reason", "", "why, recorded for the holder and shown by watch")
	cmd.MarkFlagsMutuallyExclusive("token", "force")
	return cmd
}

// Complete implements command.
func (o *releaseOptions) Complete(_ *cobra.Command, args []string) error {
	o.Pool = args[0]
	seat, err := parseSeat(args[1])
	if err != nil {
		return err
	}
	o.Seat = seat
	if o.Token != "" {
		if o.token, err = parseToken(o.Token); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements command.
func (o *releaseOptions) Validate() error {
	if err := checkName("pool", o.Pool); err != nil {
		return err
	}
	if o.Token == "" && !o.Force {
		return usageError("give --token T (fenced) or --force (whoever holds it now)")
	}
	return checkText("--reason", o.Reason, MaxReasonLen)
}

// Run implements command.
func (o *releaseOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		token := o.token
		if o.Force {
			cur, err := c.Seat(ctx, o.Pool, o.Seat)
			if err != nil {
				return err
			}
			token = cur.Token
		}
		s, err := c.ForceRelease(ctx, o.Pool, o.Seat, token, o.Reason)
		if err != nil {
			if o.Force && errors.Is(err, coordinator.ErrStaleToken) {
				return fmt.Errorf("%w; the seat changed hands while releasing, nothing was released", err)
			}
			return err
		}
		v := releaseView{Pool: o.Pool, Seat: s.Seat, Token: s.Token, Holder: s.Holder, Tenant: s.Tenant, Instance: s.Instance, Reason: o.Reason}
		return o.g.printer().Print(Result{Data: v, Text: fmt.Sprintf(
			"released seat %d of pool %q: token %d, holder %s, tenant %s, instance %s",
			v.Seat, v.Pool, v.Token, v.Holder, dash(v.Tenant), dash(v.Instance))})
	})
}
