package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// describeOptions is describe.
type describeOptions struct {
	g    *globalOptions
	Pool string
}

func newDescribeCommand(g *globalOptions) *cobra.Command {
	o := &describeOptions{g: g}
	return &cobra.Command{
		Use:   "describe POOL",
		Short: "Show a pool's spec, usage, instances, seats and queue together",
		Long: "Show everything about one pool, kubectl describe style: its spec, usage,\n" +
			"instances, held seats and queue. -o wide adds the wide columns of each list;\n" +
			"-o json and -o yaml print one document. The lists are read one after another,\n" +
			"so a busy pool can change between them.",
		Example:           "  poolctl describe gpu\n  poolctl describe gpu -o json",
		Args:              exactArgs("POOL"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
}

// Complete implements command.
func (o *describeOptions) Complete(_ *cobra.Command, args []string) error {
	o.Pool = args[0]
	return nil
}

// Validate implements command.
func (o *describeOptions) Validate() error { return checkName("pool", o.Pool) }

// poolSnapshot is what describe reads.
type poolSnapshot struct {
	status    coordinator.PoolStatus
	instances []coordinator.Instance
	seats     []coordinator.Seat
	waiters   []coordinator.Waiter
}

// Run implements command.
func (o *describeOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		s, err := readSnapshot(ctx, c, o.Pool)
		if err != nil {
			return err
		}
		v := describeViewOf(s, o.g.env.Now())
		return o.g.printer().Print(Result{Data: v, Text: o.describeText(v, s)})
	})
}

// readSnapshot reads a pool's status, instances, seats and queue.
func readSnapshot(ctx context.Context, c *coordinator.Coordinator, pool string) (poolSnapshot, error) {
	var s poolSnapshot
	var err error
	if s.status, err = c.PoolStatus(ctx, pool); err != nil {
		return s, err
	}
	if s.instances, err = c.Instances(ctx, pool); err != nil {
		return s, err
	}
	if s.seats, err = c.Seats(ctx, pool); err != nil {
		return s, err
	}
	s.waiters, err = c.Queue(ctx, pool)
	return s, err
}

// describeViewOf renders a snapshot for JSON/YAML; now fixes the ages.
func describeViewOf(s poolSnapshot, now time.Time) describeView {
	st := s.status
	v := describeView{
		Name:      st.Name,
		Spec:      poolViewOf(coordinator.Pool{Name: st.Name, Spec: st.Spec, Revision: st.Revision}),
		SpecError: Message(errString(st.SpecError)),
		Usage:     usageView{Held: st.Held, Free: st.Free, Waiting: st.Waiting},
		Instances: instanceListViewOf(st.Name, s.instances, s.seats).Instances,
		Seats:     seatListViewOf(st.Name, s.seats, now).Seats,
		Waiters:   queueViewOf(st.Name, s.waiters, now).Waiters,
	}
	if st.SpecError != "" {
		v.Spec.SeatTTLSeconds = 0
	}
	if st.Spec.Capacity > 0 {
		v.Usage.Utilization = float64(st.Held) / float64(st.Spec.Capacity)
	}
	return v
}

// describeText is describe's table output: the spec as "Field: value"
// lines, then each list as an indented table.
func (o *describeOptions) describeText(v describeView, s poolSnapshot) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, escape(value)) }
	field("Name", v.Name)
	if v.SpecError != "" {
		field("Spec", "invalid: "+v.SpecError)
	} else {
		p := v.Spec
		field("Capacity", itoa(p.Capacity))
		field("Seat TTL", itoa64(p.SeatTTLSeconds)+"s")
		field("Tenant limit", limitCell(p.TenantLimit))
		field("Tenant overrides", kvCell(p.TenantLimits))
		field("Require instance", yesNo(p.RequireInstance))
	}
	field("Spec revision", itoa64(v.Spec.Revision))
	u := v.Usage
	usage := fmt.Sprintf("%d held, %d free, %d waiting", u.Held, u.Free, u.Waiting)
	if v.SpecError == "" {
		usage += "  " + bar(u.Held, v.Spec.Capacity)
	}
	field("Usage", usage)
	tw.Flush()

	ih, irows := instancesTable(instanceListView{Instances: v.Instances})
	wh, wrows := instancesWide(s.instances)
	o.section(&b, fmt.Sprintf("Instances (%d)", len(v.Instances)), o.g.withWide(Result{Header: ih, Rows: irows}, wh, wrows))
	sv := seatListView{Seats: v.Seats}
	sh, srows := seatsTable(sv)
	wh, wrows = seatsWide(sv, addrsOf(s.instances))
	o.section(&b, fmt.Sprintf("Seats (%d held)", len(v.Seats)), o.g.withWide(Result{Header: sh, Rows: srows}, wh, wrows))
	qv := queueView{Waiters: v.Waiters}
	qh, qrows := queueTable(qv)
	wh, wrows = queueWide(qv, s.waiters)
	o.section(&b, fmt.Sprintf("Queue (%d waiting)", len(v.Waiters)), o.g.withWide(Result{Header: qh, Rows: qrows}, wh, wrows))
	return b.String()
}

// section writes a titled, indented table, or "<none>" for no rows.
func (o *describeOptions) section(b *bytes.Buffer, title string, r Result) {
	fmt.Fprintf(b, "\n%s:\n", title)
	if len(r.Rows) == 0 {
		b.WriteString("  <none>\n")
		return
	}
	var t bytes.Buffer
	_ = (&tablePrinter{w: &t}).Print(r)
	for _, l := range strings.Split(strings.TrimRight(t.String(), "\n"), "\n") {
		fmt.Fprintf(b, "  %s\n", l)
	}
}

// addrsOf maps instance IDs to their addresses.
func addrsOf(ins []coordinator.Instance) map[string]string {
	m := make(map[string]string, len(ins))
	for _, in := range ins {
		m[in.ID] = in.Addr
	}
	return m
}
