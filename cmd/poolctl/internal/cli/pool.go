package cli

import (
	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// newPoolCommand groups the pool verbs.
func newPoolCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Create, inspect, resize and delete pools",
		Args:  cobra.ArbitraryArgs,
		RunE: ran(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		}),
	}
	cmd.AddCommand(newPoolCreateCommand(g), newPoolGetCommand(g), newPoolListCommand(g),
		newPoolSetCommand(g), newPoolDeleteCommand(g))
	return cmd
}

// poolViewOf renders a pool for JSON/YAML.
func poolViewOf(p coordinator.Pool) poolView {
	return poolView{
		Name: p.Name, Capacity: p.Spec.Capacity, SeatTTLSeconds: int64(p.Spec.SeatTTL().Seconds()),
		TenantLimit: p.Spec.TenantLimit, TenantLimits: nonNil(p.Spec.TenantLimits),
		RequireInstance: p.Spec.RequireInstance, Revision: p.Revision,
	}
}

// poolTable is the table of pool get.
func poolTable(p poolView) (header []string, rows [][]string) {
	header = []string{"NAME", "CAPACITY", "SEAT-TTL", "TENANT-LIMIT", "TENANT-OVERRIDES", "REQUIRE-INSTANCE", "REVISION"}
	rows = [][]string{{p.Name, itoa(p.Capacity), itoa64(p.SeatTTLSeconds) + "s", limitCell(p.TenantLimit),
		kvCell(p.TenantLimits), yesNo(p.RequireInstance), itoa64(p.Revision)}}
	return header, rows
}

func limitCell(n int) string {
	if n == 0 {
		return "none"
	}
	return itoa(n)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
