package main

import (
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestBadConfigExitsTwo checks that bad configuration fails at start with
// exit code 2 and a message naming the field.
func TestBadConfigExitsTwo(t *testing.T) {
	ep := "http://" + testkit.FreeAddr(t) // never dialled: validation fails first
	cases := []struct {
		name  string
		args  []string
		field string
	}{
		{"unknown field", []string{"serve", "--endpoints", ep, "--config", testkit.WriteFile(t, "a.yaml", "agent:\n  ttll: 5s\n")}, "a.yaml:2: agent.ttll: unknown field"},
		{"ttl below etcd minimum", []string{"sidecar", "--endpoints", ep, "--pool", "p", "--ttl", "1s"}, "config: --ttl: 1s is outside"},
		{"empty pool", []string{"sidecar", "--endpoints", ep}, "sidecar.pool"},
		{"empty instance pool", []string{"serve", "--endpoints", ep, "--config", testkit.WriteFile(t, "b.yaml", "agent:\n  instances:\n    - {id: i1}\n")}, "agent.instances[0].pool"},
		{"bad address", []string{"serve", "--endpoints", ep, "--config", testkit.WriteFile(t, "c.yaml", "agent:\n  instances:\n    - {pool: p, id: i1, address: nope}\n")}, "agent.instances[0].address"},
		{"bad endpoint", []string{"sidecar", "--pool", "p", "--endpoints", "ftp://127.0.0.1:2379"}, `config: --endpoints: "ftp://127.0.0.1:2379"`},
		{"http endpoint with TLS", []string{"sidecar", "--pool", "p", "--endpoints", "HTTP://127.0.0.1:2379", "--cacert", "ca.pem"}, "plain http://"},
		{"bad duration flag", []string{"sidecar", "--pool", "p", "--endpoints", ep, "--wait-timeout", "soon"}, "--wait-timeout"},
		{"unknown flag", []string{"sidecar", "--pool", "p", "--bogus"}, "unknown flag"},
		{"no command", []string{}, "missing command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, tc.name, tc.args...)
			if code := p.wait(t, 10*time.Second); code != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", code, p.stderr.String())
			}
			if msg := p.stderr.String(); !strings.Contains(msg, tc.field) {
				t.Errorf("stderr does not name %q:\n%s", tc.field, msg)
			}
		})
	}
}
