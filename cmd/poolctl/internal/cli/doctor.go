package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
)

// doctorPage is how many keys doctor reads per request.
const doctorPage = 500

// doctorOptions is doctor.
type doctorOptions struct {
	g    *globalOptions
	Pool string // "" checks every pool
	Fix  bool
}

func newDoctorCommand(g *globalOptions) *cobra.Command {
	o := &doctorOptions{g: g}
	cmd := &cobra.Command{
		Use:   "doctor [POOL] [--fix]",
		Short: "Find (and with --fix remove) keys that block or confuse a pool",
		Long: "Check every key under the pools prefix (or POOL's) and list, naming each key:\n" +
			"seat, slot, queue, grant, fence and instance keys without a lease (they never\n" +
			"expire; an unleased queue key blocks every claim), foreign keys etcdpool did not\n" +
			"write, corrupt instance, seat or spec values, and seat or slot numbers above\n" +
			"the seat-number range. With --fix, delete each of those keys (a corrupt spec\n" +
			"is only reported), each only if it has not changed since it was read.\n" +
			"Deleting a seat key frees that seat; its holder sees it as force-released.\n" +
			"It exits 0 whether or not it found something; -o json lists the findings.",
		Args:              optionalPool,
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	cmd.Flags().BoolVar(&o.Fix, "fix", false, "delete the keys found (not a corrupt spec)")
	return cmd
}

// Complete implements command.
func (o *doctorOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Pool = args[0]
	}
	return nil
}

// Validate implements command.
func (o *doctorOptions) Validate() error {
	if o.Pool == "" {
		return nil
	}
	return checkName("pool", o.Pool)
}

// Run implements command.
func (o *doctorOptions) Run(ctx context.Context) error {
	return o.g.do(ctx, func(ctx context.Context, c *coordinator.Coordinator) error {
		prefix := coordinator.PoolsPrefix(c.Prefix())
		if o.Pool != "" {
			prefix = coordinator.PoolPrefix(c.Prefix(), o.Pool)
		}
		found, err := scan(ctx, c.Client(), c.Prefix(), prefix)
		if err != nil {
			return err
		}
		if o.Fix {
			if err := fix(ctx, c.Client(), found); err != nil {
				return err
			}
		}
		v := doctorView{Prefix: prefix, Findings: []doctorFindingView{}}
		for _, f := range found {
			v.Findings = append(v.Findings, doctorFindingView{Key: f.Key, Problem: f.Problem, Fixable: f.Fixable, Action: f.Action})
		}
		if len(found) == 0 {
			return o.g.printer().Print(Result{Data: v, Text: fmt.Sprintf("no problems under %s", prefix)})
		}
		h, rows := doctorTable(v)
		return o.g.printer().Print(Result{Data: v, Header: h, Rows: rows})
	})
}

// scan reads every key under prefix, a page at a time at one revision,
// and diagnoses each.
func scan(ctx context.Context, cli *clientv3.Client, root, prefix string) ([]finding, error) {
	var found []finding
	end := clientv3.GetPrefixRangeEnd(prefix)
	var rev int64
	for from := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(doctorPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", prefix, err)
		}
		rev = resp.Header.Revision
		for _, kv := range resp.Kvs {
			if f, bad := diagnose(root, kv); bad {
				found = append(found, f)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return found, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// fix deletes each fixable finding's key if its mod revision is still the
// one read, and records what happened in its Action.
func fix(ctx context.Context, cli *clientv3.Client, found []finding) error {
	for i := range found {
		f := &found[i]
		if !f.Fixable {
			f.Action = "left: fix by hand"
			continue
		}
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(f.Key), "=", f.Revision)).
			Then(clientv3.OpDelete(f.Key)).Commit()
		switch {
		case err != nil:
			return fmt.Errorf("delete %s: %w", f.Key, err)
		case resp.Succeeded:
			f.Action = "deleted"
		default:
			f.Action = "left: changed since it was read; run doctor again"
		}
	}
	return nil
}

// doctorTable is the table of doctor.
func doctorTable(v doctorView) (header []string, rows [][]string) {
	header = []string{"KEY", "PROBLEM", "ACTION"}
	for _, f := range v.Findings {
		action := f.Action
		if action == "" && f.Fixable {
			action = "run with --fix to delete"
		} else if action == "" {
			action = "fix by hand"
		}
		rows = append(rows, []string{f.Key, f.Problem, action})
	}
	return header, rows
}
