package prometheus

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool returns the path of promtool, or skips the test when it is not
// installed (.ci/run installs Debian's prometheus package for it).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus); the rules are not checked")
	}
	return p
}

func TestRulesCheck(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", "etcdpool-rules.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
}

func TestRulesUnitTests(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "etcdpool-rules.test.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestEveryAlertIsTested checks that the unit tests expect every alert of
// the rules file to fire at least once, so a new alert cannot ship
// untested.
func TestEveryAlertIsTested(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(Rules, &rules); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("etcdpool-rules.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	var fired, quiet []string
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired = append(fired, a.Alertname)
			} else {
				quiet = append(quiet, a.Alertname)
			}
		}
	}
	var n int
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !slices.Contains(fired, r.Alert) || !slices.Contains(quiet, r.Alert) {
				t.Errorf("alert %s: the unit tests must expect it both to fire and to stay quiet", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts found in etcdpool-rules.yaml")
	}
}
