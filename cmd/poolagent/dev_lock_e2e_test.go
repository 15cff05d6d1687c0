package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestDevSecondRunOnTheSameDataDirFailsFast starts `poolagent dev`, then a
// second one on the same data dir with other ports: the second must exit 1
// at once, saying which dir is in use, instead of blocking silently on
// etcd's database lock. The first keeps running and stops cleanly.
func TestDevSecondRunOnTheSameDataDirFailsFast(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	first := startDev(t, dataDir, newDevAddrs(t))
	start := time.Now()
	second := startProc(t, "dev-2", "dev", "--data-dir", dataDir, "--listen-client", testkit.FreeAddr(t),
		"--listen-peer", testkit.FreeAddr(t), "--listen", testkit.FreeAddr(t))
	if code := second.wait(t, 10*time.Second); code != 1 {
		t.Errorf("second dev exit code %d, want 1", code)
	}
	t.Logf("second dev exited %v after it started", time.Since(start))
	if msg := second.stderr.String(); !strings.Contains(msg, "data dir in use") || !strings.Contains(msg, dataDir) {
		t.Errorf("second dev's stderr does not name the data dir in use:\n%s", msg)
	}
	if first.exited() {
		t.Fatalf("first dev exited with %d", first.exitCode)
	}
	first.signal(t, syscall.SIGTERM)
	if code := first.wait(t, 15*time.Second); code != 0 {
		t.Errorf("first dev exit code %d after SIGTERM, want 0", code)
	}
}
