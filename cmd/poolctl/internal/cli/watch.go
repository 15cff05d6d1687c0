package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// watchOptions is watch.
type watchOptions struct {
	g    *globalOptions
	Pool string // "" watches every pool
	// Types keeps only these event types (--type); empty keeps all.
	Types []string
	// Rev is the first revision to show (--rev); 0 starts now.
	Rev int64

	types map[coordinator.EventType]bool
}

func newWatchCommand(g *globalOptions) *cobra.Command {
	o := &watchOptions{g: g}
	cmd := &cobra.Command{
		Use:   "watch [POOL]",
		Short: "Stream events as they happen, one line each (JSON lines with -o json)",
		Long: "Stream pool events as they happen: pools created, changed and deleted; seats\n" +
			"claimed, released, expired and force-released; instances up, draining and\n" +
			"down; waiters joining and leaving. Without POOL it watches every pool.\n" +
			"spec-changed says what changed (capacity 2 -> 4). It runs until interrupted\n" +
			"(SIGINT, SIGTERM), then exits 0.\n\n" +
			"Times: seat-claimed, seat-released, seat-force-released and waiter-joined show\n" +
			"the time in the record the writer stored (claimedAt, the release's at, since),\n" +
			"on the writer's clock; every other event, and a record without a time, shows\n" +
			"when poolctl received it, or \"-\" when --rev replayed it from history. -o json\n" +
			"says which in timeSource: \"record\", \"received\" or \"replayed\".\n\n" +
			"A lost connection, a broken stream and its resumption are reported on stderr;\n" +
			"events resume where they stopped. Only when etcd compacted the history the\n" +
			"stream needed does a \"resync\" event (never filtered out) say events are missing.",
		Example: "  poolctl watch gpu\n" +
			"  poolctl watch gpu --type seat-claimed,seat-released -o json\n" +
			"  poolctl watch --rev 1200        # replay from revision 1200, then follow",
		Args:              optionalPool,
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	cmd.Flags().StringSliceVar(&o.Types, "type", nil, "show only these event types, comma-separated: "+strings.Join(eventTypeNames(), ", "))
	cmd.Flags().Int64Var(&o.Rev, "rev", 0, "start at this etcd revision (replaying history still kept) instead of now")
	_ = cmd.RegisterFlagCompletionFunc("type", completeTypes)
	return cmd
}

// completeTypes completes --type's comma-separated list: the types not
// yet given, after those that are.
func completeTypes(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	given := toComplete[:strings.LastIndex(toComplete, ",")+1]
	var out []cobra.Completion
	for _, t := range eventTypeNames() {
		c := given + t
		if strings.HasPrefix(c, toComplete) && !slices.Contains(strings.Split(given, ","), t) {
			out = append(out, c)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// eventTypes are the event types --type accepts, in the README's order.
var eventTypes = []coordinator.EventType{
	coordinator.EventPoolCreated, coordinator.EventPoolDeleted, coordinator.EventSpecChanged,
	coordinator.EventSeatClaimed, coordinator.EventSeatReleased, coordinator.EventSeatExpired,
	coordinator.EventSeatForceReleased, coordinator.EventInstanceUp, coordinator.EventInstanceDraining,
	coordinator.EventInstanceDown, coordinator.EventWaiterJoined, coordinator.EventWaiterLeft,
}

func eventTypeNames() []string {
	out := make([]string, len(eventTypes))
	for i, t := range eventTypes {
		out[i] = string(t)
	}
	return out
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
	if o.Rev < 0 {
		return usageError("--rev %d: want a revision of 1 or more, or 0 for now", o.Rev)
	}
	o.types = map[coordinator.EventType]bool{}
	for _, t := range o.Types {
		if !slices.Contains(eventTypes, coordinator.EventType(t)) {
			return usageError("--type %q: want one of %s", t, strings.Join(eventTypeNames(), ", "))
		}
		o.types[coordinator.EventType(t)] = true
	}
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
	conns, stopConns := watchConnection(ctx, c.Client())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopConns()
	wg.Add(1)
	go func() { defer wg.Done(); o.reportConnection(conns) }()
	s := o.stream(c)
	sctx, cancel := o.g.withTimeout(ctx)
	rev, err := s.start(sctx)
	err = timeoutErr(sctx, err)
	cancel()
	if err != nil {
		return err
	}
	p := o.g.printer()
	err = s.run(ctx, rev, func(ev watchEvent) error {
		if len(o.types) > 0 && !o.types[ev.Type] && ev.Type != coordinator.EventResync {
			return nil
		}
		if err := p.Stream(eventResult(ev)); err != nil {
			return fmt.Errorf("write event: %w", err)
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil // interrupted: the normal end of a watch
	}
	return err
}

// stream is the event stream of this watch.
func (o *watchOptions) stream(c *coordinator.Coordinator) *eventStream {
	prefix := coordinator.PoolsPrefix(c.Prefix())
	if o.Pool != "" {
		prefix = coordinator.PoolPrefix(c.Prefix(), o.Pool)
	}
	return &eventStream{
		cli: c.Client(), tr: translator{root: c.Prefix(), now: o.g.env.Now}, prefix: prefix, from: o.Rev,
		retry: 500 * time.Millisecond, warn: o.warn,
	}
}

// warn prints a line about the stream on stderr.
func (o *watchOptions) warn(format string, args ...any) {
	fmt.Fprintf(o.g.env.ErrOut, "poolctl: %s\n", escape(fmt.Sprintf(format, args...)))
}

// reportConnection says on stderr when the connection to etcd is lost
// and when it is back. It returns when conns is closed.
func (o *watchOptions) reportConnection(conns <-chan connChange) {
	var lost time.Time
	for ch := range conns {
		if !ch.Up {
			lost = time.Now()
			o.warn("watch: connection to etcd lost (%s); events resume where they stopped when it is back", ch.State)
			continue
		}
		o.warn("watch: connection to etcd restored after %v", time.Since(lost).Round(time.Millisecond))
	}
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
func eventResult(ev watchEvent) Result {
	v := eventView{Type: string(ev.Type), Pool: ev.Pool, Seat: ev.Seat, Token: ev.Token, Holder: ev.Holder,
		Tenant: ev.Tenant, Instance: ev.Instance, Reason: ev.Reason, Revision: ev.Revision, Time: ev.Time.UTC(),
		TimeSource: ev.TimeSource, Changes: ev.Changes}
	if v.Changes == nil {
		v.Changes = []specChangeView{}
	}
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
	reason := v.Reason
	if v.Type == string(coordinator.EventSpecChanged) {
		reason = specChangesText(v.Changes)
	}
	when := v.Time.Local().Format("15:04:05.000")
	if v.TimeSource == timeReplayed {
		when = "-"
	}
	rows = [][]string{{when, v.Type, dash(v.Pool), seat, token,
		dash(v.Holder), dash(v.Tenant), dash(v.Instance), dash(reason)}}
	return header, rows
}
