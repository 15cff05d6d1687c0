package cli

import (
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/etcdpool/etcdpool/internal/termsafe"
)

// yamlPrinter prints the JSON schema as YAML (same field names); a stream
// is a sequence of documents separated by "---".
type yamlPrinter struct{ w io.Writer }

// Print implements Printer. A rune termsafe calls unsafe shows as the
// text termsafe.Escape makes of it (\u202e), as in the tables: the YAML
// parser behind this printer refused DEL and the C1 controls, so one such
// value failed the whole view, and its emitter writes the bidirectional
// overrides raw (found by a review, 2026-12-05). -o json keeps them,
// escaped.
func (p yamlPrinter) Print(r Result) error {
	j, err := marshalJSON(r.Data, false)
	if err != nil {
		return err
	}
	j = escapeUnsafe(j, func(r rune) string { return strings.ReplaceAll(termsafe.Escape(string(r)), `\`, `\\`) })
	b, err := yaml.JSONToYAML(j)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	_, err = p.w.Write(b)
	return err
}

// Stream implements Printer.
func (p yamlPrinter) Stream(r Result) error {
	if _, err := io.WriteString(p.w, "---\n"); err != nil {
		return err
	}
	return p.Print(r)
}
