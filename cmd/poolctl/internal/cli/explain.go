package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// explainOptions is explain.
type explainOptions struct {
	g        *globalOptions
	Pool     string
	Tenant   string
	Instance string
	Labels   []string

	labels map[string]string
}

func newExplainCommand(g *globalOptions) *cobra.Command {
	o := &explainOptions{g: g}
	cmd := &cobra.Command{
		Use:   "explain POOL [--tenant T] [--instance I] [--label k=v ...]",
		Short: "Say whether a claim with these options would be granted now, and if not, why and what would have to change",
		Long: "Read POOL once and judge a claim with the given options as the claim itself\n" +
			"would: granted now, waiting (and why: others in line, pool full, tenant at its\n" +
			"limit, no ready instance matching, every ready instance full), or never (its\n" +
			"tenant's limit is 0). Every reason in the way is listed, in the order a claim\n" +
			"checks them, with what would have to change; for a pool with instances, each\n" +
			"instance is listed with why it would or would not take the claim. It changes\n" +
			"nothing. It exits 0 when the claim would be granted now and 6 when not.",
		Example: "  poolctl explain asr --tenant a\n" +
			"  poolctl explain gpu --label zone=a -o json",
		Args:              exactArgs("POOL"),
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	f := cmd.Flags()
	f.StringVar(&o.Tenant, "tenant", "", "the claim's tenant")
	f.StringVar(&o.Instance, "instance", "", "the instance the claim names")
	f.StringArrayVar(&o.Labels, "label", nil, "a label k=v the claim selects instances by; repeatable, or k=v,k2=v2 (alias --labels)")
	f.SetNormalizeFunc(sidecarFlagNames)
	return cmd
}

// Complete implements command.
func (o *explainOptions) Complete(_ *cobra.Command, args []string) error {
	o.Pool = args[0]
	labels, err := parseLabels(o.Labels)
	o.labels = labels
	return err
}

// Validate implements command.
func (o *explainOptions) Validate() error {
	return checkClaimNames(o.Pool, o.Tenant, o.Instance)
}

// Run implements command.
func (o *explainOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		opts := []coordinator.ClaimOption{coordinator.WithTenant(o.Tenant), coordinator.WithInstance(o.Instance)}
		if len(o.labels) > 0 {
			opts = append(opts, coordinator.WithLabels(o.labels))
		}
		e, err := c.Explain(ctx, o.Pool, opts...)
		if err != nil {
			return err
		}
		v := explainViewOf(e)
		if err := o.g.printer().Print(Result{Data: v, Text: explainText(v)}); err != nil {
			return err
		}
		if v.Granted {
			return nil
		}
		first := coordinator.WaitStatus{Reason: coordinator.WaitReason(v.Blockers[0].Reason), Detail: v.Blockers[0].Detail}
		return classify(coordinator.ErrNoSeat, fmt.Errorf("%s would not be granted now: %s", claimPhrase(v), first))
	})
}

// explainView is explain.
type explainView struct {
	Pool      string            `json:"pool"`
	Tenant    string            `json:"tenant"`
	Instance  string            `json:"instance"`
	Labels    map[string]string `json:"labels"`
	Revision  int64             `json:"revision"`
	Granted   bool              `json:"granted"`
	Never     bool              `json:"never"`
	Blockers  []blockerView     `json:"blockers"`
	Instances []instanceFitView `json:"instances"`
}

// blockerView is one reason in the way: a coordinator.WaitReason, what it
// means here, what would have to change, and the poolctl command that
// shows or changes it.
type blockerView struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	Change string `json:"change"`
	Try    string `json:"try"`
}

// instanceFitView is one instance and whether it would take the claim.
type instanceFitView struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Held  int    `json:"held"`
	Seats int    `json:"seats"`
	Fits  bool   `json:"fits"`
	Why   string `json:"why"`
}

func explainViewOf(e coordinator.Explanation) explainView {
	v := explainView{Pool: e.Pool, Tenant: e.Tenant, Instance: e.Instance, Labels: nonNil(e.Labels),
		Revision: e.Revision, Granted: e.Granted, Never: e.Never,
		Blockers: []blockerView{}, Instances: []instanceFitView{}}
	for _, b := range e.Blockers {
		v.Blockers = append(v.Blockers, blockerView{Reason: string(b.Reason), Detail: b.Detail, Change: b.Change, Try: tryFor(e, b.Reason)})
	}
	for _, f := range e.Instances {
		v.Instances = append(v.Instances, instanceFitView{ID: f.ID, State: string(f.State), Held: f.Held, Seats: f.Seats, Fits: f.Fits, Why: f.Why})
	}
	return v
}

// tryFor is the poolctl command that shows or lifts a reason.
func tryFor(e coordinator.Explanation, r coordinator.WaitReason) string {
	limit, _ := e.Spec.LimitFor(e.Tenant)
	switch r {
	case coordinator.WaitQueue:
		return "poolctl queue " + e.Pool
	case coordinator.WaitPoolFull:
		return fmt.Sprintf("poolctl seats %s; poolctl pool set %s --capacity %d", e.Pool, e.Pool, e.Spec.Capacity+1)
	case coordinator.WaitTenantLimit:
		return fmt.Sprintf("poolctl pool set %s --tenant-limit-for %s=%d", e.Pool, e.Tenant, limit+1)
	case coordinator.WaitTenantDenied:
		return fmt.Sprintf("poolctl pool set %s --tenant-limit-for %s=1", e.Pool, e.Tenant)
	case coordinator.WaitNoMatchingInstance, coordinator.WaitInstancesFull:
		return "poolctl instances " + e.Pool
	}
	return ""
}

// claimPhrase names the claim judged: `a claim on pool "gpu" for tenant
// "a" with labels zone=a`.
func claimPhrase(v explainView) string {
	s := fmt.Sprintf("a claim on pool %q", v.Pool)
	if v.Tenant != "" {
		s += fmt.Sprintf(" for tenant %q", v.Tenant)
	}
	if v.Instance != "" {
		s += fmt.Sprintf(" on instance %q", v.Instance)
	}
	if len(v.Labels) > 0 {
		s += " with labels " + kvCell(v.Labels)
	}
	return s
}

// explainText is the table output of explain.
func explainText(v explainView) string {
	var b strings.Builder
	verdict := "would be granted now"
	switch {
	case v.Never:
		verdict = "can never be granted while the pool spec stays as it is: it fails at once"
	case !v.Granted:
		verdict = "would wait"
	}
	fmt.Fprintf(&b, "%s %s (revision %d).\n", upperFirst(claimPhrase(v)), verdict, v.Revision)
	for _, bl := range v.Blockers {
		fmt.Fprintf(&b, "  %s\n", coordinator.WaitStatus{Reason: coordinator.WaitReason(bl.Reason), Detail: bl.Detail}.String())
		fmt.Fprintf(&b, "    would change if: %s\n", bl.Change)
		if bl.Try != "" {
			fmt.Fprintf(&b, "    try: %s\n", bl.Try)
		}
	}
	if len(v.Instances) > 0 {
		b.WriteString("Instances:\n")
		tw := tabwriter.NewWriter(&b, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "  ID\tSTATE\tHELD\tFITS\tWHY NOT")
		for _, f := range v.Instances {
			fits, held := "yes", fmt.Sprintf("%d/%d", f.Held, f.Seats)
			if !f.Fits {
				fits = "no"
			}
			if f.State == "" {
				held = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", f.ID, dash(f.State), held, fits, dash(f.Why))
		}
		_ = tw.Flush()
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
