package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// devAddrs are the three addresses of one dev instance, picked once so
// that a restart cannot be handed one of its own just-freed ports.
type devAddrs struct{ client, peer, listen string }

func newDevAddrs(t *testing.T) devAddrs {
	return devAddrs{client: testkit.FreeAddr(t), peer: testkit.FreeAddr(t), listen: testkit.FreeAddr(t)}
}

func startDev(t *testing.T, dataDir string, a devAddrs) *proc {
	t.Helper()
	clientAddr, listen := a.client, a.listen
	p := startProc(t, "dev", "dev", "--data-dir", dataDir, "--listen-client", clientAddr,
		"--listen-peer", a.peer, "--listen", listen, "--ttl", "2s", "--api-listen", testkit.FreeAddr(t))
	testkit.Eventually(t, 30*time.Second, "dev banner and instances registered", func() bool {
		if p.exited() {
			t.Fatalf("dev exited with %d:\n%s", p.exitCode, p.stderr.String())
		}
		return strings.Contains(p.stdout.String(), "poolctl --endpoints http://"+clientAddr+" status") &&
			httpStatus("http://"+listen+agent.ReadyzPath) == http.StatusOK
	})
	return p
}

func TestDevClaimThroughLibraryAndCleanSIGINT(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	addrs := newDevAddrs(t)
	clientAddr := addrs.client
	p := startDev(t, dataDir, addrs)

	cli := testkit.Client(t, "http://"+clientAddr)
	co := testkit.Coordinator(t, cli)
	sess := testkit.Session(t, cli, coordinator.MinTTL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := co.Claim(ctx, sess, "demo", coordinator.WithWait())
	if err != nil {
		t.Fatalf("claim on the dev pool: %v", err)
	}
	if in, ok := cl.Instance(); !ok || !strings.HasPrefix(in.ID, "demo-") {
		t.Errorf("claim bound to %+v (%v), want a demo instance", in, ok)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_ = sess.Close(ctx)
	cli.Close()

	// dev serves the web view on its --listen, next to /metrics; a page
	// still open does not hold up the exit.
	web := "http://" + addrs.listen + "/ui/"
	if !strings.Contains(p.stdout.String(), "web view: "+web) || httpStatus(web) != http.StatusOK ||
		httpStatus("http://"+addrs.listen+agent.MetricsPath) != http.StatusOK {
		t.Errorf("web view not at %s next to /metrics; banner:\n%s", web, p.stdout.String())
	}
	page, err := http.Get(web + "events")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()

	p.signal(t, syscall.SIGINT)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("dev exit code %d after SIGINT, want 0", code)
	}
	// No process is left behind: the client port is free again, and the
	// data is kept.
	l, err := net.Listen("tcp", clientAddr)
	if err != nil {
		t.Fatalf("etcd port still taken after dev exited: %v", err)
	}
	l.Close()
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err != nil {
		t.Fatalf("etcd data not kept: %v", err)
	}
	// A second run on the same data dir finds the pool and does not fail.
	p2 := startDev(t, dataDir, addrs)
	p2.signal(t, syscall.SIGINT)
	if code := p2.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("second dev run exit code %d, want 0", code)
	}
}

func TestDevPortInUseIsAClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := startProc(t, "dev", "dev", "--data-dir", t.TempDir(), "--listen-client", l.Addr().String(),
		"--listen-peer", testkit.FreeAddr(t), "--listen", testkit.FreeAddr(t))
	if code := p.wait(t, 15*time.Second); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "already in use") || !strings.Contains(msg, l.Addr().String()) {
		t.Errorf("stderr does not say which address is in use:\n%s", msg)
	}
}
