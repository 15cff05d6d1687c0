package config

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// yamlDoc is a parsed configuration file: each field's line, for errors
// that name a field the file set.
type yamlDoc struct {
	file  string
	lines map[string]int // dotted path ("agent.pools[0].capacity") -> line
}

// parseYAML parses b as a configuration document and checks its shape
// against Config: every key is a field, no key repeats, and every value
// has the field's kind (a number for a number, a Go duration string for a
// duration). Errors are FieldErrors carrying file and line, so that the
// strict decode that follows has nothing left to refuse.
func parseYAML(file string, b []byte) (*yamlDoc, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, &FieldError{File: file, Msg: "not YAML", Err: err}
	}
	d := &yamlDoc{file: file, lines: map[string]int{}}
	if len(root.Content) == 0 {
		return d, nil // an empty file sets nothing
	}
	return d, d.walk(root.Content[0], reflect.TypeFor[Config](), "")
}

func (d *yamlDoc) walk(n *yaml.Node, t reflect.Type, path string) error {
	if path != "" {
		d.lines[path] = n.Line
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return nil
	}
	switch {
	case t == reflect.TypeFor[Duration]():
		if _, err := parseDuration(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			return d.errAt(n, path, "want a duration such as \"10s\", got %s", describe(n))
		}
	case t.Kind() == reflect.Struct:
		return d.walkStruct(n, t, path)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.errAt(n, path, "want a list, got %s", describe(n))
		}
		for i, item := range n.Content {
			if err := d.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map:
		return d.walkMap(n, t, path)
	default:
		return d.scalar(n, t.Kind(), path)
	}
	return nil
}

func (d *yamlDoc) walkStruct(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.errAt(n, path, "want a mapping of fields, got %s", describe(n))
	}
	fields := jsonFields(t)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		f, ok := fields[k.Value]
		switch {
		case !ok:
			return d.errAt(k, p, "unknown field; %s takes %s", orTop(path), strings.Join(sortedNames(fields), ", "))
		case seen[k.Value]:
			return d.errAt(k, p, "set twice")
		}
		seen[k.Value] = true
		d.lines[p] = k.Line
		if err := d.walk(v, f.Type, p); err != nil {
			return err
		}
		d.lines[p] = k.Line // the key's line, not the value's
	}
	return nil
}

func (d *yamlDoc) walkMap(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.errAt(n, path, "want a mapping, got %s", describe(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return d.errAt(k, join(path, k.Value), "set twice")
		}
		seen[k.Value] = true
		if err := d.walk(v, t.Elem(), join(path, k.Value)); err != nil {
			return err
		}
	}
	return nil
}

// scalar checks a value of a plain field by its YAML tag.
func (d *yamlDoc) scalar(n *yaml.Node, k reflect.Kind, path string) error {
	want, ok := map[reflect.Kind]string{reflect.Int: "!!int", reflect.Int64: "!!int", reflect.Bool: "!!bool"}[k]
	switch {
	case n.Kind != yaml.ScalarNode:
		return d.errAt(n, path, "want a single value, got %s", describe(n))
	case ok && n.Tag != want:
		return d.errAt(n, path, "want %s, got %s", strings.TrimPrefix(want, "!!"), describe(n))
	}
	return nil
}

func (d *yamlDoc) errAt(n *yaml.Node, path, format string, args ...any) error {
	return &FieldError{Field: path, File: d.file, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// locate adds the file and line of err's field, when err is a FieldError
// about a field the file set.
func (d *yamlDoc) locate(err error) {
	var fe *FieldError
	if d == nil || !errors.As(err, &fe) || fe.File != "" {
		return
	}
	if line, ok := d.lines[fe.Field]; ok {
		fe.File, fe.Line = d.file, line
	}
}

// describe names what a node holds, for "want X, got Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q (%s)", n.Value, strings.TrimPrefix(n.Tag, "!!"))
}

// jsonFields maps the json names of t's fields to the fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "" && name != "-" {
			out[name] = f
		}
	}
	return out
}

func sortedNames(m map[string]reflect.StructField) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}
