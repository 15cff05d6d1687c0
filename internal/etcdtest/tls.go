package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/testkit"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// CA is a certificate authority made in a test with crypto/x509. Its files
// live in the test's temp dir.
type CA struct {
	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate (PEM).
	File string
}

// CertOptions describe one certificate that a CA issues. Zero values take
// the documented defaults.
type CertOptions struct {
	// Name is the file stem and the subject's common name. Required.
	Name string
	// DNSNames are SANs. Default none.
	DNSNames []string
	// IPs are IP SANs. Default none.
	IPs []net.IP
	// NotAfter ends the validity. Default: a day from now. A time in the
	// past makes an expired certificate.
	NotAfter time.Time
}

// Pair is a certificate and its key, as PEM files.
type Pair struct {
	// Cert is the certificate file.
	Cert string
	// Key is the private key file.
	Key string
}

// NewCA makes a CA whose files are written under t.TempDir().
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("etcdtest: CA: %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.File = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Issue makes a certificate for both server and client use, signed by ca.
func (ca *CA) Issue(o CertOptions) Pair {
	ca.t.Helper()
	key := newKey(ca.t)
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	notBefore := time.Now().Add(-time.Hour)
	if o.NotAfter.Before(notBefore) {
		notBefore = o.NotAfter.Add(-time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(ca.t),
		Subject:      pkix.Name{CommonName: o.Name},
		NotBefore:    notBefore,
		NotAfter:     o.NotAfter,
		DNSNames:     o.DNSNames,
		IPAddresses:  o.IPs,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatalf("etcdtest: issue %s: %v", o.Name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatalf("etcdtest: key %s: %v", o.Name, err)
	}
	return Pair{Cert: ca.write(o.Name+".pem", "CERTIFICATE", der), Key: ca.write(o.Name+"-key.pem", "EC PRIVATE KEY", kder)}
}

func (ca *CA) write(name, typ string, der []byte) string {
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatalf("etcdtest: write %s: %v", path, err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("etcdtest: key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("etcdtest: serial: %v", err)
	}
	return n
}

// TLSServer is one embedded member that serves clients over TLS only.
type TLSServer struct {
	// Endpoint is the https:// client URL.
	Endpoint string
	// Addr is the client host:port.
	Addr string
	etcd *embed.Etcd
}

// StartTLS starts one member whose client URL is https:// with server's
// certificate. With clientCA set, it requires client certificates signed
// by it. It stops when the test ends.
func StartTLS(t testing.TB, server Pair, clientCA string) *TLSServer {
	t.Helper()
	addr := testkit.FreeAddr(t)
	cu := url.URL{Scheme: "https", Host: addr}
	pu := url.URL{Scheme: "http", Host: testkit.FreeAddr(t)}
	ec := embed.NewConfig()
	ec.Name = "tls"
	ec.Dir = t.TempDir()
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = ec.Name + "=" + pu.String()
	ec.UnsafeNoFsync = true
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	ec.ClientTLSInfo = transport.TLSInfo{CertFile: server.Cert, KeyFile: server.Key,
		TrustedCAFile: clientCA, ClientCertAuth: clientCA != ""}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatalf("etcdtest: start TLS member: %v", err)
	}
	s := &TLSServer{Endpoint: cu.String(), Addr: addr, etcd: e}
	t.Cleanup(func() { e.Server.Stop(); e.Close() })
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcdtest: TLS member failed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("etcdtest: TLS member not ready within 30s")
	}
	return s
}
