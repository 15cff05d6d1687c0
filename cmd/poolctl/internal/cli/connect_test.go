package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/etcdtest"
)

// TestConnectFlags covers §2 and §3 of the hardening issue: TLS cannot be
// dropped by an upper-case scheme, secrets are not echoed, variables are
// named when their value is wrong, and a short --command-timeout is not
// blamed on --dial-timeout.
func TestConnectFlags(t *testing.T) {
	dead := deadEndpoint(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		want   string // in stderr
		absent string // not in stderr
	}{
		{"upper-case HTTP with TLS", []string{"--endpoints", "HTTP://" + dead, "--cacert", ca, "status"}, nil, ExitUsage, "plain http://", ""},
		{"http with --server-name", []string{"--endpoints", "http://" + dead, "--server-name", "etcd", "status"}, nil, ExitUsage, "plain http://", ""},
		{"user :secret", []string{"--endpoints", dead, "--user", ":s3cretXYZ", "status"}, nil, ExitUsage, "--user", "s3cretXYZ"},
		{"bad endpoint from env", []string{"status"}, map[string]string{"ETCDPOOL_ENDPOINTS": "ftp://x:1"}, ExitUsage, "ETCDPOOL_ENDPOINTS", ""},
		{"bad dial timeout from env", []string{"status"}, map[string]string{"ETCDPOOL_DIAL_TIMEOUT": "soon"}, ExitUsage, "ETCDPOOL_DIAL_TIMEOUT", ""},
		{"missing password file", []string{"--endpoints", dead, "--user", "root", "--password-file", "/nonexistent/pw", "status"}, nil, ExitUsage, "password-file", ""},
		{"long endpoint truncated", []string{"--endpoints", strings.Repeat("x", 10000), "status"}, nil, ExitUsage, "bytes)", strings.Repeat("x", 200)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := newInvocation()
			for k, v := range tt.env {
				inv.vars[k] = v
			}
			r := runArgs(inv, tt.args...)
			r.want(t, tt.code)
			if !strings.Contains(r.err, tt.want) || (tt.absent != "" && strings.Contains(r.err, tt.absent)) {
				t.Errorf("stderr %q: want %q, must not contain %.20q", r.err, tt.want, tt.absent)
			}
		})
	}
}

// TestCommandTimeoutBlamed checks that a --command-timeout shorter than
// the connection is named as the cause, not --dial-timeout.
func TestCommandTimeoutBlamed(t *testing.T) {
	h := newHarness(t)
	r := h.run("--command-timeout", "1ns", "status")
	r.want(t, ExitUnreachable)
	if !strings.Contains(r.err, "--command-timeout") || strings.Contains(r.err, "--dial-timeout") {
		t.Errorf("stderr %q: want --command-timeout named, not --dial-timeout", r.err)
	}
}

// TestPasswordSources connects to an auth-enabled etcd with the password
// from --password-file and from ETCDPOOL_PASSWORD_FILE, never on argv.
func TestPasswordSources(t *testing.T) {
	h := newHarness(t)
	h.enableAuth(t)
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte(etcdtest.RootPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.run(loginTimeouts("--user", "root", "--password-file", file, "status")...).want(t, ExitOK)
	inv := newInvocation()
	inv.vars["ETCDPOOL_USER"] = "root"
	inv.vars["ETCDPOOL_PASSWORD_FILE"] = file
	h.runWith(inv, loginTimeouts("status")...).want(t, ExitOK)
	start := time.Now()
	h.run(loginTimeouts("--user", "root:wrong", "status")...).want(t, ExitDenied)
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("a wrong password took %v to fail", d)
	}
}

// TestTLS runs poolctl against an embedded etcd serving TLS with client
// certificates: the right material works (upper-case scheme, no scheme,
// --server-name), a wrong CA and a missing client certificate fail at
// once with their cause in one line.
func TestTLS(t *testing.T) {
	ca := etcdtest.NewCA(t, "etcd")
	other := etcdtest.NewCA(t, "other")
	srv := etcdtest.StartTLS(t, ca.Issue(etcdtest.CertOptions{Name: "server", DNSNames: []string{"etcd.test"}}), ca.File)
	client := ca.Issue(etcdtest.CertOptions{Name: "client"})
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"server name, upper-case scheme", []string{"--endpoints", "HTTPS://" + srv.Addr, "--server-name", "etcd.test", "--cacert", ca.File, "--cert", client.Cert, "--key", client.Key}, ExitOK, ""},
		{"no scheme", []string{"--endpoints", srv.Addr, "--server-name", "etcd.test", "--cacert", ca.File, "--cert", client.Cert, "--key", client.Key}, ExitOK, ""},
		{"SAN mismatch", []string{"--endpoints", srv.Addr, "--cacert", ca.File, "--cert", client.Cert, "--key", client.Key}, ExitUnreachable, "doesn't contain any IP SANs (the endpoint's host is not in the server certificate"},
		{"wrong CA", []string{"--endpoints", srv.Addr, "--server-name", "etcd.test", "--cacert", other.File, "--cert", client.Cert, "--key", client.Key}, ExitUnreachable, "unknown authority (check --cacert)"},
		{"no client cert", []string{"--endpoints", srv.Addr, "--server-name", "etcd.test", "--cacert", ca.File}, ExitUnreachable, "certificate required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r := runArgs(newInvocation(), append(tt.args, "--dial-timeout", "5s", "status")...)
			r.want(t, tt.code)
			if !strings.Contains(r.err, tt.want) {
				t.Errorf("stderr %q lacks %q", r.err, tt.want)
			}
			if d := time.Since(start); tt.code != ExitOK && d > 4*time.Second {
				t.Errorf("took %v; a TLS failure should be reported before --dial-timeout", d)
			}
		})
	}
}
