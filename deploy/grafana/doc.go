// Package grafana holds etcdpool's Grafana dashboard (etcdpool.json),
// embedded so that tests can check it: its structure here, and in the
// poolagent tests that every metric it queries is exported by the
// binaries. Import it in Grafana (Dashboards > Import) and pick the
// Prometheus data source that scrapes the agents and sidecars.
package grafana

import (
	_ "embed"
	"encoding/json"
)

// Dashboard is etcdpool.json.
//
//go:embed etcdpool.json
var Dashboard []byte

// Queries returns every PromQL expression of the dashboard: panel targets
// and template variable queries.
func Queries() ([]string, error) {
	var d dashboard
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, t.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	return out, nil
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
	// Templating holds the dashboard's variables.
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}
