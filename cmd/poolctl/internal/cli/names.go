package cli

import (
	"fmt"
	"strconv"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/spf13/cobra"
)

// checkName checks a pool, instance or tenant name before anything
// connects, with coordinator.ValidateName (which also refuses "." and ".."
// and echoes at most the start of a long name). what names the argument:
// `pool: coordinator: invalid argument: name "a/b" has '/'; ...`.
func checkName(what, n string) error {
	if err := coordinator.ValidateName(n); err != nil {
		return classify(errUsage, fmt.Errorf("%s: %w", what, err))
	}
	return nil
}

// checkPrefix checks --prefix with coordinator.ValidatePrefix.
func checkPrefix(p string) error {
	if err := coordinator.ValidatePrefix(p); err != nil {
		return classify(errUsage, fmt.Errorf("--prefix: %w", err))
	}
	return nil
}

// parseSeat parses a seat number argument.
func parseSeat(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= coordinator.MaxCapacity {
		return 0, usageError("seat %q: want a seat number 0..%d as shown by `poolctl seats`", s, coordinator.MaxCapacity-1)
	}
	return n, nil
}

// parseToken parses a fencing token.
func parseToken(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, usageError("--token %q: want a positive integer, the TOKEN column of `poolctl seats`", s)
	}
	return n, nil
}

// optionalPool is the Args check of commands whose one argument, POOL, may
// be left out.
func optionalPool(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usageError("%s takes at most one argument: POOL (got %d)", cmd.CommandPath(), len(args))
	}
	return nil
}

// checkClaimNames checks the names a claim's flags give: the pool, and the
// tenant and instance when set.
func checkClaimNames(pool, tenant, instance string) error {
	if err := checkName("pool", pool); err != nil {
		return err
	}
	for _, n := range [][2]string{{"tenant", tenant}, {"instance", instance}} {
		if n[1] == "" {
			continue
		}
		if err := checkName(n[0], n[1]); err != nil {
			return err
		}
	}
	return nil
}
