package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// tablePrinter prints aligned columns, kubectl style. Every cell and text
// line passes through escape: values come from etcd, written by anyone.
type tablePrinter struct {
	w         io.Writer
	noHeaders bool

	widths []int // stream column widths, fixed by the first streamed item
}

// Print implements Printer.
func (p *tablePrinter) Print(r Result) error {
	if r.Header == nil {
		if r.Text == "" {
			return nil
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimRight(r.Text, "\n"), "\n") {
			lines = append(lines, escape(l))
		}
		_, err := fmt.Fprintln(p.w, strings.Join(lines, "\n"))
		return err
	}
	tw := tabwriter.NewWriter(p.w, 0, 8, 3, ' ', 0)
	if !p.noHeaders {
		fmt.Fprintln(tw, strings.Join(r.Header, "\t"))
	}
	for _, row := range escapeRows(r.Rows) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// Stream implements Printer. Columns cannot be aligned over a stream, so
// they are padded to the header's width or a generous minimum.
func (p *tablePrinter) Stream(r Result) error {
	if p.widths == nil {
		p.widths = make([]int, len(r.Header))
		for i, h := range r.Header {
			p.widths[i] = max(len(h), streamMinWidth(h))
		}
		if !p.noHeaders {
			if _, err := fmt.Fprintln(p.w, padRow(r.Header, p.widths)); err != nil {
				return err
			}
		}
	}
	for _, row := range escapeRows(r.Rows) {
		if _, err := fmt.Fprintln(p.w, padRow(row, p.widths)); err != nil {
			return err
		}
	}
	return nil
}

// streamMinWidth gives streamed columns room for typical values.
func streamMinWidth(header string) int {
	switch header {
	case "TIME":
		return 12
	case "TYPE":
		return 19
	case "POOL", "HOLDER":
		return 12
	}
	return 6
}

func padRow(cells []string, widths []int) string {
	var b strings.Builder
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		w := len(c)
		if i < len(widths) {
			w = max(w, widths[i])
		}
		fmt.Fprintf(&b, "%-*s   ", w, c)
	}
	return strings.TrimRight(b.String(), " ")
}
