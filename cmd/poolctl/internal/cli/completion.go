package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

func newCompletionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: "Print a shell completion script. Pool names complete from etcd, using the\n" +
			"same --endpoints and credentials as the command line being completed.\n\n" +
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

// completePools completes the first argument with pool names read from
// etcd. It gives up quietly, after one second at most, when etcd is not
// reachable.
func completePools(g *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		// Never prompt for a password in the middle of a completion.
		if len(args) > 0 || g.applyEnv(cmd.Flags()) != nil || g.validate() != nil || g.needsPrompt() {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		g.DialTimeout, g.CommandTimeout = min(g.DialTimeout, time.Second), min(g.CommandTimeout, time.Second)
		_ = g.do(cmd.Context(), func(ctx context.Context, c *coordinator.Coordinator) error {
			pools, err := c.ListPools(ctx)
			for _, p := range pools {
				if strings.HasPrefix(p.Name, prefix) {
					names = append(names, p.Name)
				}
			}
			return err
		})
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
