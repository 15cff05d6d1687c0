package cli

import (
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// yamlPrinter prints the JSON schema as YAML (same field names); a stream
// is a sequence of documents separated by "---".
type yamlPrinter struct{ w io.Writer }

// Print implements Printer.
func (p yamlPrinter) Print(r Result) error {
	b, err := yaml.Marshal(r.Data)
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
