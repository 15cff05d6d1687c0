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

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/agent/agenttest"
	"github.com/etcdpool/etcdpool/coordinator"
)

// devAddrs are the three addresses of one dev instance, picked once so
// that a restart cannot be handed one of its own just-freed ports.
type devAddrs struct{ client, peer, listen string }

func newDevAddrs(t *testing.T) devAddrs {
	return devAddrs{client: freeAddr(t), peer: freeAddr(t), listen: freeAddr(t)}
}

func startDev(t *testing.T, dataDir string, a devAddrs) *proc {
	t.Helper()
	clientAddr, listen := a.client, a.listen
	p := startProc(t, "dev", "dev", "--data-dir", dataDir, "--listen-client", clientAddr,
		"--listen-peer", a.peer, "--listen", listen, "--ttl", "2s", "--api-listen", freeAddr(t))
	agenttest.Eventually(t, 30*time.Second, "dev banner and instances registered", func() bool {
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

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + clientAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	co := agenttest.Coordinator(t, cli)
	sess := newSession(t, cli)
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
		"--listen-peer", freeAddr(t), "--listen", freeAddr(t))
	if code := p.wait(t, 15*time.Second); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "already in use") || !strings.Contains(msg, l.Addr().String()) {
		t.Errorf("stderr does not say which address is in use:\n%s", msg)
	}
}
