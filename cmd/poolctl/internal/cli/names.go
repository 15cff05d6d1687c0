package cli

import (
	"strconv"

	"github.com/etcdpool/etcdpool/coordinator"
)

// checkName checks a pool, instance or tenant name before anything
// connects, by the coordinator's rule: 1..MaxNameLen printable ASCII
// characters, no '/', no space. (The coordinator checks again; it does not
// export its check.)
func checkName(what, n string) error {
	if n == "" || len(n) > coordinator.MaxNameLen {
		return usageError("%s name %q: must be 1..%d characters", what, n, coordinator.MaxNameLen)
	}
	for _, r := range n {
		if r <= ' ' || r > '~' || r == '/' {
			return usageError("%s name %q: %q is not allowed; use printable ASCII without '/' or spaces", what, n, r)
		}
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
