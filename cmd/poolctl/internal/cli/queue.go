package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// queueOptions is queue.
type queueOptions struct {
	g     *globalOptions
	Pool  string
	Watch bool // -w: again after every change
}

func newQueueCommand(g *globalOptions) *cobra.Command {
	o := &queueOptions{g: g}
	cmd := &cobra.Command{
		Use:               "queue POOL",
		Short:             "List a pool's waiters in the order they will be served, with how long each has waited",
		Args:              exactArgs("POOL"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	addWatchFlag(cmd, &o.Watch)
	return cmd
}

// Complete implements command.
func (o *queueOptions) Complete(_ *cobra.Command, args []string) error {
	o.Pool = args[0]
	return nil
}

// Validate implements command.
func (o *queueOptions) Validate() error { return checkName("pool", o.Pool) }

// Run implements command.
func (o *queueOptions) Run(ctx context.Context) error {
	return o.g.view(ctx, o.Watch, o.Pool, func(ctx context.Context, c *coordinator.Coordinator) (frame, error) {
		ws, err := c.Queue(ctx, o.Pool)
		if err != nil {
			return nil, err
		}
		return func(now time.Time) Result {
			v := queueViewOf(o.Pool, ws, now)
			h, rows := queueTable(v)
			wh, wrows := queueWide(v, ws)
			return o.g.withWide(Result{Data: v, Header: h, Rows: rows}, wh, wrows)
		}, nil
	})
}

// queueViewOf renders waiters for JSON/YAML; now fixes how long they waited.
func queueViewOf(pool string, ws []coordinator.Waiter, now time.Time) queueView {
	v := queueView{Pool: pool, Waiters: make([]waiterView, 0, len(ws))}
	for _, w := range ws {
		v.Waiters = append(v.Waiters, waiterView{
			Position: w.Position, Holder: w.Holder, Tenant: w.Tenant, Instance: w.Instance,
			Labels: nonNil(w.Labels), Lease: leaseHex(w.Lease), Since: w.Since.UTC(),
			WaitedSeconds: elapsed(now, w.Since),
		})
	}
	return v
}

// queueTable is the table of queue.
func queueTable(v queueView) (header []string, rows [][]string) {
	header = []string{"POSITION", "HOLDER", "TENANT", "INSTANCE", "LABELS", "WAITED"}
	for _, w := range v.Waiters {
		rows = append(rows, []string{itoa(w.Position), w.Holder, dash(w.Tenant), dash(w.Instance),
			kvCell(w.Labels), age(time.Duration(w.WaitedSeconds) * time.Second)})
	}
	return header, rows
}
