package grafana

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDashboardStructure checks what Grafana needs to import the dashboard
// and what an on-call reader needs from each panel.
func TestDashboardStructure(t *testing.T) {
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(Dashboard)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("etcdpool.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed to import and link the dashboard", d.UID, d.Title)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["pool"] {
		t.Errorf("variables %v, want datasource and pool", vars)
	}
	ids := map[int]string{}
	for _, p := range d.Panels {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel id %d used by %q and %q", p.ID, prev, p.Title)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos x %d w %d outside Grafana's 24 columns", p.Title, p.GridPos.X, p.GridPos.W)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q: both are needed", p.ID, p.Title, p.Description)
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %q, want the ${datasource} variable", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: target %+v lacks an expr or refId", p.Title, tg)
			}
			if strings.Contains(tg.Expr, "etcdpool_pool_") && strings.Contains(tg.Expr, "sum by") && !strings.Contains(tg.Expr, "max by") {
				t.Errorf("panel %q: %s sums a pool family, which every agent exports alike; aggregate with max", p.Title, tg.Expr)
			}
		}
	}
	if len(ids) < 10 {
		t.Errorf("%d panels: the on-call set is missing", len(ids))
	}
}
