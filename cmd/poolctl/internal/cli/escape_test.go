package cli

import (
	"strings"
	"testing"

	"github.com/etcdpool/etcdpool/coordinator"
)

func TestEscape(t *testing.T) {
	tests := map[string]string{
		"plain":             "plain",
		"gpu-0 ✓":           "gpu-0 ✓",
		"a\x1b[2Jb":         `a\x1b[2Jb`,
		"tab\there":         `tab\x09here`,
		"new\nline":         `new\x0aline`,
		"bidi\u202eevil":    `bidi\u202eevil`,
		"bad utf8 \xff end": `bad utf8 \xff end`,
		"c1 \u0085":         `c1 \x85`,
	}
	for in, want := range tests {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostileHolderRendered claims a seat, through the library, with a
// holder full of terminal escapes (poolctl refuses such a --holder, but
// any client can write one) and checks that seats prints it escaped.
func TestHostileHolderRendered(t *testing.T) {
	h := newHarness(t)
	h.createPool("p", coordinator.PoolSpec{Capacity: 1})
	h.claim("p", coordinator.WithHolder("evil\x1b]0;pwned\x07\x1b[2J"))
	r := h.run("seats", "p")
	r.want(t, ExitOK)
	if strings.ContainsAny(r.out, "\x1b\x07") || !strings.Contains(r.out, `evil\x1b]0;pwned\x07\x1b[2J`) {
		t.Errorf("seats output is not escaped:\n%q", r.out)
	}
}
