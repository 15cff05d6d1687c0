package etcdclient_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
)

// TestTLSCauses dials an embedded etcd serving TLS with certificates made
// here, and checks that each misconfiguration fails within the dial
// timeout with etcdclient.ErrTLS and its x509/TLS cause in one line, and that
// ServerName takes effect.
func TestTLSCauses(t *testing.T) {
	ca := etcdtest.NewCA(t, "etcd")
	other := etcdtest.NewCA(t, "other")
	server := ca.Issue(etcdtest.CertOptions{Name: "server", DNSNames: []string{"etcd.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	named := ca.Issue(etcdtest.CertOptions{Name: "named", DNSNames: []string{"etcd.test"}})
	expiredServer := ca.Issue(etcdtest.CertOptions{Name: "expired-server", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotAfter: time.Now().Add(-time.Hour)})
	client := ca.Issue(etcdtest.CertOptions{Name: "client"})
	expiredClient := ca.Issue(etcdtest.CertOptions{Name: "expired-client", NotAfter: time.Now().Add(-time.Hour)})

	good := etcdtest.StartTLS(t, server, ca.File)
	byName := etcdtest.StartTLS(t, named, ca.File)
	expired := etcdtest.StartTLS(t, expiredServer, ca.File)
	_, port, _ := net.SplitHostPort(good.Addr)

	tests := []struct {
		name string
		cfg  etcdclient.Config
		want string // "" succeeds
	}{
		{"ok", etcdclient.Config{Endpoints: []string{good.Endpoint}, CAFile: ca.File, CertFile: client.Cert, KeyFile: client.Key}, ""},
		{"no scheme, upper-case scheme", etcdclient.Config{Endpoints: []string{good.Addr, "HTTPS://" + good.Addr}, CAFile: ca.File, CertFile: client.Cert, KeyFile: client.Key}, ""},
		{"server name", etcdclient.Config{Endpoints: []string{byName.Addr}, ServerName: "etcd.test", CAFile: ca.File, CertFile: client.Cert, KeyFile: client.Key}, ""},
		{"wrong CA", etcdclient.Config{Endpoints: []string{good.Endpoint}, CAFile: other.File, CertFile: client.Cert, KeyFile: client.Key}, "x509: certificate signed by unknown authority (check --cacert)"},
		{"no client cert", etcdclient.Config{Endpoints: []string{good.Endpoint}, CAFile: ca.File}, "certificate required"},
		{"expired client cert", etcdclient.Config{Endpoints: []string{good.Endpoint}, CAFile: ca.File, CertFile: expiredClient.Cert, KeyFile: expiredClient.Key}, "expired certificate"},
		{"expired server cert", etcdclient.Config{Endpoints: []string{expired.Endpoint}, CAFile: ca.File, CertFile: client.Cert, KeyFile: client.Key}, "x509: certificate has expired"},
		{"SAN mismatch", etcdclient.Config{Endpoints: []string{"localhost:" + port}, CAFile: ca.File, CertFile: client.Cert, KeyFile: client.Key}, "not localhost"},
		{"server name mismatch", etcdclient.Config{Endpoints: []string{good.Addr}, ServerName: "wrong.test", CAFile: ca.File, CertFile: client.Cert, KeyFile: client.Key}, "not wrong.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.DialTimeout = 2 * time.Second
			start := time.Now()
			cli, err := etcdclient.Dial(context.Background(), tt.cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Dial: %v", err)
				}
				defer cli.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := cli.Put(ctx, "k", "v"); err != nil {
					t.Fatalf("Put: %v", err)
				}
				return
			}
			if err == nil {
				cli.Close()
				t.Fatal("Dial succeeded")
			}
			msg := err.Error()
			if !errors.Is(err, etcdclient.ErrTLS) || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") || !etcdclient.IsPermanent(err) {
				t.Errorf("err = %q (TLS %v, class %v), want one line with %q", msg, errors.Is(err, etcdclient.ErrTLS), etcdclient.Classify(err), tt.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
