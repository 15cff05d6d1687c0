package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// seatsOptions is seats.
type seatsOptions struct {
	g    *globalOptions
	Pool string
}

func newSeatsCommand(g *globalOptions) *cobra.Command {
	o := &seatsOptions{g: g}
	return &cobra.Command{
		Use:               "seats POOL",
		Short:             "List a pool's held seats: holder, tenant, instance, token, age, lease TTL left",
		Args:              exactArgs("POOL"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
}

// Complete implements command.
func (o *seatsOptions) Complete(_ *cobra.Command, args []string) error {
	o.Pool = args[0]
	return nil
}

// Validate implements command.
func (o *seatsOptions) Validate() error { return checkName("pool", o.Pool) }

// Run implements command.
func (o *seatsOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		seats, err := c.Seats(ctx, o.Pool)
		if err != nil {
			return err
		}
		v := seatListViewOf(o.Pool, seats, o.g.env.Now())
		h, rows := seatsTable(v)
		return o.g.printer().Print(Result{Data: v, Header: h, Rows: rows})
	})
}

// seatListViewOf renders seats for JSON/YAML; now fixes their ages.
func seatListViewOf(pool string, seats []coordinator.Seat, now time.Time) seatListView {
	v := seatListView{Pool: pool, Seats: make([]seatView, 0, len(seats))}
	for _, s := range seats {
		v.Seats = append(v.Seats, seatView{
			Seat: s.Seat, Holder: s.Holder, Tenant: s.Tenant, Instance: s.Instance, Token: s.Token,
			Lease: leaseHex(s.Lease), ClaimedAt: s.ClaimedAt.UTC(), AgeSeconds: elapsed(now, s.ClaimedAt),
			TTLSeconds: seconds(s.TTL),
		})
	}
	return v
}

// seatsTable is the table of seats.
func seatsTable(v seatListView) (header []string, rows [][]string) {
	header = []string{"SEAT", "HOLDER", "TENANT", "INSTANCE", "TOKEN", "AGE", "LEASE-TTL"}
	for _, s := range v.Seats {
		rows = append(rows, []string{itoa(s.Seat), s.Holder, dash(s.Tenant), dash(s.Instance), itoa64(s.Token),
			age(time.Duration(s.AgeSeconds) * time.Second), ttlCell(time.Duration(s.TTLSeconds) * time.Second)})
	}
	return header, rows
}
