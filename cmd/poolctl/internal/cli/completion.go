package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: "Print a shell completion script. Pool names, instance IDs and seat numbers\n" +
			"complete from etcd, using the same --endpoints and credentials as the command\n" +
			"line being completed; -o values and watch --type values complete too.\n\n" +
			"  bash:  source <(poolctl completion bash)\n" +
			"  zsh:   poolctl completion zsh > \"${fpath[1]}/_poolctl\"\n" +
			"  fish:  poolctl completion fish | source",
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      exactArgs("SHELL"),
		RunE: ran(func(cmd *cobra.Command, args []string) error {
			root, w := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			}
			return usageError("unknown shell %q: want bash, zsh or fish", args[0])
		}),
	}
}

// lister lists the candidates of one argument or flag. args are the
// arguments before it (args[0] is the pool where it matters).
type lister func(ctx context.Context, c *coordinator.Coordinator, args []string) ([]cobra.Completion, error)

// completePools completes the first argument with pool names read from
// etcd.
func completePools(g *globalOptions) cobra.CompletionFunc { return completeArgs(g, listPools) }

// completeArgs completes positional argument i with ls[i], read from etcd.
// It gives up quietly, after one second at most, when etcd is not
// reachable, and never prompts for a password.
func completeArgs(g *globalOptions, ls ...lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= len(ls) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fromEtcd(g, cmd, args, prefix, ls[len(args)]), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFlag completes a flag's value with l (args are the command's
// positional arguments so far).
func completeFlag(g *globalOptions, l lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return fromEtcd(g, cmd, args, prefix, l), cobra.ShellCompDirectiveNoFileComp
	}
}

// fromEtcd runs l with a short-lived connection and keeps the candidates
// that start with prefix.
func fromEtcd(g *globalOptions, cmd *cobra.Command, args []string, prefix string, l lister) []cobra.Completion {
	// Never prompt for a password in the middle of a completion.
	if g.applyEnv(cmd.Flags()) != nil || g.validate() != nil || g.needsPrompt() {
		return nil
	}
	var out []cobra.Completion
	g.DialTimeout, g.CommandTimeout = min(g.DialTimeout, time.Second), min(g.CommandTimeout, time.Second)
	_ = g.do(cmd.Context(), func(ctx context.Context, c *coordinator.Coordinator) error {
		cands, err := l(ctx, c, args)
		for _, cand := range cands {
			if strings.HasPrefix(cand, prefix) {
				out = append(out, cand)
			}
		}
		return err
	})
	return out
}

// listPools lists pool names.
func listPools(ctx context.Context, c *coordinator.Coordinator, _ []string) ([]cobra.Completion, error) {
	pools, err := c.ListPools(ctx)
	var out []cobra.Completion
	for _, p := range pools {
		out = append(out, p.Name)
	}
	return out, err
}

// listInstances lists the instance IDs of pool args[0], described by
// state and address.
func listInstances(ctx context.Context, c *coordinator.Coordinator, args []string) ([]cobra.Completion, error) {
	if len(args) == 0 || coordinator.ValidateName(args[0]) != nil {
		return nil, nil
	}
	ins, err := c.Instances(ctx, args[0])
	var out []cobra.Completion
	for _, in := range ins {
		out = append(out, cobra.CompletionWithDesc(in.ID, escape(fmt.Sprintf("%s %s", in.State, dash(in.Addr)))))
	}
	return out, err
}

// listSeats lists the held seat numbers of pool args[0], described by
// holder and token.
func listSeats(ctx context.Context, c *coordinator.Coordinator, args []string) ([]cobra.Completion, error) {
	if len(args) == 0 || coordinator.ValidateName(args[0]) != nil {
		return nil, nil
	}
	seats, err := c.Seats(ctx, args[0])
	var out []cobra.Completion
	for _, s := range seats {
		out = append(out, cobra.CompletionWithDesc(itoa(s.Seat), escape(fmt.Sprintf("%s, token %d", s.Holder, s.Token))))
	}
	return out, err
}

// outputFormats are the values of -o.
var outputFormats = []cobra.Completion{
	cobra.CompletionWithDesc("table", "aligned columns"),
	cobra.CompletionWithDesc("wide", "table with more columns"),
	cobra.CompletionWithDesc("json", "the documented JSON schema"),
	cobra.CompletionWithDesc("yaml", "the JSON schema as YAML"),
}

// registerCompletions adds the completions that span commands: -o values,
// and instance IDs for every --instance flag (run, and any verb that takes
// POOL first and --instance).
func registerCompletions(root *cobra.Command, g *globalOptions) {
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Flags().Lookup("instance") != nil {
			if _, ok := cmd.GetFlagCompletionFunc("instance"); !ok {
				_ = cmd.RegisterFlagCompletionFunc("instance", completeFlag(g, listInstances))
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
