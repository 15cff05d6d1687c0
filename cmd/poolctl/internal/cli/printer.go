package cli

import (
	"fmt"
	"io"
)

// Result is what a command prints. Data is the JSON/YAML document, a value
// of one of the documented schema types in schema.go. Header and Rows are
// the table, built by a pure builder; a result without a header prints Text
// as its table output instead.
type Result struct {
	Data   any
	Header []string
	Rows   [][]string
	Text   string
}

// Printer writes results in one output format.
type Printer interface {
	// Print writes one complete result.
	Print(r Result) error
	// Stream writes one item of an unbounded stream (a watch event) as soon
	// as it arrives: one line in table and JSON formats.
	Stream(r Result) error
}

// newPrinter returns the printer for --output.
func newPrinter(format string, noHeaders bool, w io.Writer) (Printer, error) {
	switch format {
	case "table", "wide": // the builders add wide's columns
		return &tablePrinter{w: w, noHeaders: noHeaders}, nil
	case "json":
		return jsonPrinter{w: w}, nil
	case "yaml":
		return yamlPrinter{w: w}, nil
	}
	return nil, usageError("--output %q: want table, wide, json or yaml", format)
}

// printer returns the printer the global flags ask for.
func (g *globalOptions) printer() Printer {
	p, err := newPrinter(g.Output, g.NoHeaders, g.env.Out)
	if err != nil {
		panic(fmt.Sprintf("poolctl: output format not validated: %v", err))
	}
	return p
}
