// Package prometheus holds etcdpool's Prometheus alerting rules
// (etcdpool-rules.yaml) and their unit tests (etcdpool-rules.test.yaml),
// embedded so that tests can check them. The Go tests run `promtool check
// rules` and `promtool test rules` on them, and the poolagent tests check
// that every metric name they use is exported by the binaries.
package prometheus

import _ "embed"

// Rules is etcdpool-rules.yaml.
//
//go:embed etcdpool-rules.yaml
var Rules []byte
