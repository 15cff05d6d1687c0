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
		Use:   "queue POOL",
		Short: "List a pool's waiters in the order they will be served, with how long and why each waits",
		Long: "List every claimant waiting for a seat of POOL: those in line in the order they\n" +
			"will be served (POSITION 0 is next), then those held back off the line by their\n" +
			"own tenant limit or instance selector (POSITION -). WHY says what keeps each from\n" +
			"a seat now: pool full, tenant at limit, no ready instance matching, every ready\n" +
			"instance full, or behind N others in line. `poolctl explain` says what would\n" +
			"have to change.",
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
			WaitedSeconds: elapsed(now, w.Since), Reason: string(w.Reason), Detail: w.Detail, Ahead: w.Ahead,
		})
	}
	return v
}

// queueTable is the table of queue.
func queueTable(v queueView) (header []string, rows [][]string) {
	header = []string{"POSITION", "HOLDER", "TENANT", "INSTANCE", "LABELS", "WAITED", "WHY"}
	for _, w := range v.Waiters {
		pos := itoa(w.Position)
		if w.Position < 0 {
			pos = "-"
		}
		why := coordinator.WaitStatus{Reason: coordinator.WaitReason(w.Reason), Detail: w.Detail, Ahead: w.Ahead}.String()
		rows = append(rows, []string{pos, w.Holder, dash(w.Tenant), dash(w.Instance),
			kvCell(w.Labels), age(time.Duration(w.WaitedSeconds) * time.Second), why})
	}
	return header, rows
}
