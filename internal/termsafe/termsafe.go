// Package termsafe keeps values that other clients wrote to etcd (holder,
// reason, instance, keys) from acting on a terminal: Escape renders them,
// Check refuses them where a value is written. One rule for poolctl and
// poolagent's config.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports runes that must not reach a terminal raw: control
// characters (ESC starts terminal escape sequences), the bidirectional
// overrides that reorder what is displayed, and invalid UTF-8.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069') || r == utf8.RuneError
}

// Escape renders s safe for a terminal: each unsafe rune becomes a Go
// escape (\x1b, \u202e), and invalid UTF-8 bytes become \xNN.
func Escape(s string) string {
	if !strings.ContainsFunc(s, Unsafe) {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x100 && Unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Check returns an error naming the first unsafe rune of s and its byte
// offset, or nil.
func Check(s string) error {
	if i := strings.IndexFunc(s, Unsafe); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("control or invisible character %U at byte %d; use printable text", r, i)
	}
	return nil
}
