package cli

import (
	"encoding/json"
	"io"
)

// jsonPrinter prints the documented schema: indented documents for Print,
// one compact object per line (JSON lines) for Stream.
type jsonPrinter struct{ w io.Writer }

// Print implements Printer.
func (p jsonPrinter) Print(r Result) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.Data)
}

// Stream implements Printer.
func (p jsonPrinter) Stream(r Result) error {
	return json.NewEncoder(p.w).Encode(r.Data)
}
