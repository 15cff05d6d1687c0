// Package prometheus holds etcdpool's Prometheus alerting rules
// (etcdpool-rules.yaml) and their unit tests (etcdpool-rules.test.yaml),
// embedded so that tests can check them. The Go tests run `promtool check
// rules` and `promtool test rules` on them, and the poolagent tests check
// that every metric name they use is exported by the binaries.
package prometheus

import (
	_ "embed"

	"sigs.k8s.io/yaml"
)

// Rules is etcdpool-rules.yaml.
//
//go:embed etcdpool-rules.yaml
var Rules []byte

// Exprs returns the PromQL expression of every rule.
func Exprs() ([]string, error) {
	var rf struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(Rules, &rf); err != nil {
		return nil, err
	}
	var out []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out, nil
}
