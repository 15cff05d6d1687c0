package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// watchOptions is watch.
type watchOptions struct {
	g    *globalOptions
	Pool string // "" watches every pool
}

func newWatchCommand(g *globalOptions) *cobra.Command {
	o := &watchOptions{g: g}
	return &cobra.Command{
		Use:   "watch [POOL]",
		Short: "Stream events as they happen, one line each (JSON lines with -o json)",
		Long: "Stream pool events as they happen: pools created, changed and deleted; seats\n" +
			"claimed, released, expired and force-released; instances up, draining and\n" +
			"down; waiters joining and leaving. Without POOL it watches every pool.\n" +
			"A \"resync\" event means history was compacted away and events may be missing\n" +
			"before it. It runs until interrupted (SIGINT, SIGTERM), then exits 0.",
		Args:              optionalPool,
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
}

// Complete implements command.
func (o *watchOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Pool = args[0]
	}
	return nil
}

// Validate implements command.
func (o *watchOptions) Validate() error {
	if o.Pool == "" {
		return nil
	}
	return checkName("pool", o.Pool)
}

// Run implements command.
func (o *watchOptions) Run(ctx context.Context) error {
	c, done, err := o.g.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := o.checkPool(ctx, c); err != nil {
		return err
	}
	p := o.g.printer()
	for ev := range c.Watch(ctx, o.Pool) {
		if err := p.Stream(eventResult(ev)); err != nil {
			return fmt.Errorf("write event: %w", err)
		}
	}
	if ctx.Err() != nil {
		return nil // interrupted: the normal end of a watch
	}
	return errors.New("watch: the event stream ended")
}

// checkPool makes a watch that would print nothing forever fail instead:
// without read permission on what it watches (exit 8, naming the prefix),
// or of an unknown pool (exit 5).
func (o *watchOptions) checkPool(ctx context.Context, c *coordinator.Coordinator) error {
	ctx, cancel := o.g.withTimeout(ctx)
	defer cancel()
	prefix := coordinator.PoolsPrefix(c.Prefix())
	if o.Pool != "" {
		prefix = coordinator.PoolPrefix(c.Prefix(), o.Pool)
	}
	if err := etcdclient.CheckAccess(ctx, c.Client(), []etcdclient.Access{{Key: prefix, Prefix: true}}); err != nil {
		return timeoutErr(ctx, err)
	}
	if o.Pool == "" {
		return nil
	}
	if _, err := c.GetPool(ctx, o.Pool); errors.Is(err, coordinator.ErrPoolNotFound) || errors.Is(err, context.DeadlineExceeded) {
		return timeoutErr(ctx, err)
	}
	return nil
}

// eventResult renders one event for every format.
func eventResult(ev coordinator.Event) Result {
	v := eventView{Type: string(ev.Type), Pool: ev.Pool, Seat: ev.Seat, Token: ev.Token, Holder: ev.Holder,
		Tenant: ev.Tenant, Instance: ev.Instance, Reason: ev.Reason, Revision: ev.Revision, Time: ev.Time.UTC()}
	h, rows := eventTable(v)
	return Result{Data: v, Header: h, Rows: rows}
}

// eventTable is the table of one watch event.
func eventTable(v eventView) (header []string, rows [][]string) {
	header = []string{"TIME", "TYPE", "POOL", "SEAT", "TOKEN", "HOLDER", "TENANT", "INSTANCE", "REASON"}
	seat, token := "-", "-"
	if v.Seat >= 0 {
		seat = itoa(v.Seat)
	}
	if v.Token > 0 {
		token = itoa64(v.Token)
	}
	rows = [][]string{{v.Time.Local().Format("15:04:05.000"), v.Type, dash(v.Pool), seat, token,
		dash(v.Holder), dash(v.Tenant), dash(v.Instance), dash(v.Reason)}}
	return header, rows
}
