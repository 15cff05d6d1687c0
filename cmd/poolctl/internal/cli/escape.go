package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxReasonLen bounds release --reason, which is stored in etcd and shown
// to the holder and by watch.
const MaxReasonLen = 1024

// unsafeRune reports runes that must not reach a terminal raw: control
// characters (ESC starts terminal escape sequences) and the bidirectional
// overrides that reorder what is displayed.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == utf8.RuneError
}

// escape renders s safe for a terminal: each unsafe rune becomes a Go
// escape (\x1b, \u202e), and invalid UTF-8 bytes become \xNN. Values
// written by other clients (holder, reason, instance, keys) pass through
// it wherever poolctl prints them in table form; JSON and YAML escape by
// themselves.
func escape(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x100 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

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

// checkText refuses, where a value is written, control characters and
// bidirectional overrides, and values longer than max bytes.
func checkText(flag, s string, max int) error {
	if len(s) > max {
		return usageError("%s: %d bytes; at most %d", flag, len(s), max)
	}
	if i := strings.IndexFunc(s, unsafeRune); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return usageError("%s: control or invisible character %U at byte %d; use printable text", flag, r, i)
	}
	return nil
}
