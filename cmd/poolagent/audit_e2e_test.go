package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestServeAuditLog runs `poolagent serve --audit-log FILE`, force-releases
// a claim and stops the agent, and checks that the file records the
// claim, the force-release with who and why, and the drain, in revision
// order.
func TestServeAuditLog(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := startAgent(t, c.Endpoint(0), `
agent:
  pools:
    - {name: au, capacity: 1}
  instances:
    - {pool: au, id: i1, address: "127.0.0.1:9001"}
`, "--audit-log", path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := co.Claim(ctx, testkit.Session(t, cli, 2*time.Second), "au", coordinator.WithHolder("job-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.ForceRelease(ctx, "au", cl.Seat(), cl.Token(), "hung job"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "force-release in the audit log", func() bool {
		return strings.Contains(readFile(t, path), `"seat-force-released"`)
	})
	a.signal(t, syscall.SIGTERM)
	if code := a.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("agent exited %d", code)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var types []string
	var last int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			coordinator.Event
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Revision < last {
			t.Errorf("revision %d after %d", r.Revision, last)
		}
		last = r.Revision
		types = append(types, string(r.Type))
		if r.Type == coordinator.EventSeatForceReleased && (r.Reason != "hung job" || r.By == "" || r.Holder != "job-1") {
			t.Errorf("force-release record %+v: want holder job-1, reason and who", r.Event)
		}
	}
	// The agent's audit log starts once the pool exists; the instance is
	// registered around then. Everything from the claim on must be there.
	got := strings.Join(types, " ")
	if !strings.Contains(got, "seat-claimed seat-force-released instance-draining") {
		t.Errorf("audit log types %q: want the claim, the force-release and the drain in order", got)
	}
}
