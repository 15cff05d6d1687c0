package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/etcdpool/etcdpool/internal/termsafe"
)

// jsonPrinter prints the documented schema: indented documents for Print,
// one compact object per line (JSON lines) for Stream.
type jsonPrinter struct{ w io.Writer }

// Print implements Printer.
func (p jsonPrinter) Print(r Result) error {
	b, err := safeJSON(r.Data, true)
	if err != nil {
		return err
	}
	_, err = p.w.Write(append(b, '\n'))
	return err
}

// Stream implements Printer.
func (p jsonPrinter) Stream(r Result) error {
	b, err := safeJSON(r.Data, false)
	if err != nil {
		return err
	}
	_, err = p.w.Write(append(b, '\n'))
	return err
}

// safeJSON encodes v, indented or compact, with every rune termsafe calls
// unsafe escaped as \uXXXX: encoding/json leaves DEL, the C1 controls and
// the bidirectional overrides raw, and values other clients wrote (a
// holder, a reason) would reach the terminal as they are (found by a
// review, 2026-12-05). The escapes decode to the same values.
func safeJSON(v any, indent bool) ([]byte, error) {
	b, err := marshalJSON(v, indent)
	if err != nil {
		return nil, err
	}
	return escapeUnsafe(b, func(r rune) string { return fmt.Sprintf(`\u%04x`, r) }), nil
}

func marshalJSON(v any, indent bool) ([]byte, error) {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return b, nil
}

// escapeUnsafe replaces, in b, JSON that encoding/json wrote, each rune
// termsafe calls unsafe with esc(r). Outside strings the encoder writes
// no such rune but the newlines of indentation, which stay.
func escapeUnsafe(b []byte, esc func(rune) string) []byte {
	unsafe := func(r rune) bool { return r != '\n' && termsafe.Unsafe(r) }
	if !bytes.ContainsFunc(b, unsafe) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if unsafe(r) {
			out = append(out, esc(r)...)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}
