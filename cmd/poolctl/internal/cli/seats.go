package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// seatsOptions is seats.
type seatsOptions struct {
	g     *globalOptions
	Pool  string
	Watch bool // -w: again after every change
}

func newSeatsCommand(g *globalOptions) *cobra.Command {
	o := &seatsOptions{g: g}
	cmd := &cobra.Command{
		Use:   "seats POOL",
		Short: "List a pool's held seats: holder, tenant, instance, token, age, lease TTL left",
		Long: "List a pool's held seats: holder, tenant, instance, token, age and lease TTL left.\n" +
			"-o wide adds the lease, when the seat was claimed (the holder's clock) and the\n" +
			"instance's address. With -w, LEASE-TTL is as of the last change; ages keep counting.",
		Args:              exactArgs("POOL"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	addWatchFlag(cmd, &o.Watch)
	return cmd
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
	return o.g.view(ctx, o.Watch, o.Pool, func(ctx context.Context, c *coordinator.Coordinator) (frame, error) {
		seats, err := c.Seats(ctx, o.Pool)
		if err != nil {
			return nil, err
		}
		addrs, err := o.addrs(ctx, c)
		if err != nil {
			return nil, err
		}
		return func(now time.Time) Result {
			v := seatListViewOf(o.Pool, seats, now)
			h, rows := seatsTable(v)
			wh, wrows := seatsWide(v, addrs)
			return o.g.withWide(Result{Data: v, Header: h, Rows: rows}, wh, wrows)
		}, nil
	})
}

// addrs maps instance IDs to addresses for -o wide; nil otherwise.
func (o *seatsOptions) addrs(ctx context.Context, c *coordinator.Coordinator) (map[string]string, error) {
	if !o.g.wide() {
		return nil, nil
	}
	ins, err := c.Instances(ctx, o.Pool)
	return addrsOf(ins), err
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
