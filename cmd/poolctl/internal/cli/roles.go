package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/internal/roles"
)

// rolesOptions is roles.
type rolesOptions struct {
	g     *globalOptions
	Pool  string
	Actor string
	Apply bool

	actor roles.Actor
}

func newRolesCommand(g *globalOptions) *cobra.Command {
	o := &rolesOptions{g: g}
	cmd := &cobra.Command{
		Use:   "roles [POOL] --actor claimant|agent|operator|viewer [--apply]",
		Short: "Print (or apply) the least-privilege etcd role of an actor",
		Long: "Print the etcdctl commands that create the least-privilege etcd role of an\n" +
			"actor: claimant and agent roles are for one POOL; operator and viewer roles\n" +
			"cover the whole --prefix and take no POOL. With --apply, create the role and\n" +
			"grant its permissions through etcd's auth API instead (needs a user with the\n" +
			"root role). Then grant the role to a user: etcdctl user grant-role USER ROLE.\n" +
			"See the README's section on roles for what RBAC cannot prevent.",
		Args:              optionalPool,
		RunE:              runE(o),
		ValidArgsFunction: completePools(g),
	}
	cmd.Flags().StringVar(&o.Actor, "actor", "", "claimant, agent, operator or viewer (required)")
	cmd.Flags().BoolVar(&o.Apply, "apply", false, "create the role through etcd's auth API instead of printing commands")
	return cmd
}

// Complete implements command.
func (o *rolesOptions) Complete(_ *cobra.Command, args []string) error {
	if len(args) == 1 {
		o.Pool = args[0]
	}
	return nil
}

// Validate implements command.
func (o *rolesOptions) Validate() error {
	a, err := roles.Parse(o.Actor)
	if err != nil {
		return usageError("--%v", err)
	}
	o.actor = a
	switch {
	case a.PoolScoped() && o.Pool == "":
		return usageError("the %s role is for one pool: give POOL", a)
	case !a.PoolScoped() && o.Pool != "":
		return usageError("the %s role covers the whole --prefix: give no POOL", a)
	case o.Pool != "":
		return checkName("pool", o.Pool)
	}
	return nil
}

// Run implements command.
func (o *rolesOptions) Run(ctx context.Context) error {
	name := roles.Name(o.g.Prefix, o.Pool, o.actor)
	perms := roles.Permissions(o.g.Prefix, o.Pool, o.actor)
	v := roleView{Role: name, Actor: string(o.actor), Pool: o.Pool, Permissions: []rolePermView{}, Commands: roles.Etcdctl(name, perms)}
	for _, p := range perms {
		typ := "read"
		if p.Write {
			typ = "readwrite"
		}
		v.Permissions = append(v.Permissions, rolePermView{Type: typ, Key: p.Key, Prefix: p.Prefix})
	}
	if o.Apply {
		ctx, cancel := o.g.withTimeout(ctx)
		defer cancel()
		cli, err := o.g.client(ctx)
		if err != nil {
			return timeoutErr(ctx, err)
		}
		defer cli.Close()
		if err := roles.Apply(ctx, cli, name, perms); err != nil {
			return timeoutErr(ctx, err)
		}
		v.Applied = true
	}
	return o.g.printer().Print(Result{Data: v, Text: roleText(v)})
}

// roleText is the table output of roles: the commands, or what was
// applied.
func roleText(v roleView) string {
	if v.Applied {
		var b strings.Builder
		b.WriteString("role " + v.Role + " created with:\n")
		for _, p := range v.Permissions {
			b.WriteString("  " + p.Type + " " + p.Key)
			if p.Prefix {
				b.WriteString(" (prefix)")
			}
			b.WriteString("\n")
		}
		b.WriteString("grant it: etcdctl user grant-role USER " + v.Role + "\n")
		return b.String()
	}
	return strings.Join(v.Commands, "\n") + "\n# then: etcdctl user grant-role USER " + v.Role + "\n"
}
