package cli

import "github.com/etcdpool/etcdpool/internal/termsafe"

// MaxReasonLen bounds release --reason, which is stored in etcd and shown
// to the holder and by watch.
const MaxReasonLen = 1024

// escape renders a value for the terminal with termsafe.Escape. Values
// written by other clients (holder, reason, instance, keys) pass through
// it wherever poolctl prints them in table form and in error lines; JSON
// and YAML escape by themselves.
func escape(s string) string { return termsafe.Escape(s) }

// escapeRows escapes every cell.
func escapeRows(rows [][]string) [][]string {
	out := make([][]string, len(rows))
	for i, row := range rows {
		out[i] = make([]string, len(row))
		for j, c := range row {
			out[i][j] = escape(c)
		}
	}
	return out
}

// checkText refuses, where a value is written, what termsafe.Check
// refuses, and values longer than max bytes.
func checkText(flag, s string, max int) error {
	if len(s) > max {
		return usageError("%s: %d bytes; at most %d", flag, len(s), max)
	}
	if err := termsafe.Check(s); err != nil {
		return usageError("%s: %v", flag, err)
	}
	return nil
}
