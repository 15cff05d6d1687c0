package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// running is an audit log being written by a goroutine.
type running struct {
	log    *Log
	cancel context.CancelFunc
	wait   func() error
}

func start(t *testing.T, co *coordinator.Coordinator, path string, logs *testkit.SyncBuffer) *running {
	t.Helper()
	l, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &running{log: l, cancel: cancel, wait: l.Start(ctx, co, nil, slog.New(slog.NewTextHandler(logs, nil)))}
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := r.wait(); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	if err := r.log.Close(); err != nil {
		t.Fatal(err)
	}
}

// readRecords parses every line of the log.
func readRecords(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// waitFor waits until the log holds a record matching ok.
func waitFor(t *testing.T, path, what string, ok func(Record) bool) []Record {
	t.Helper()
	var recs []Record
	testkit.Eventually(t, 10*time.Second, what, func() bool {
		recs = readRecords(t, path)
		for _, r := range recs {
			if ok(r) {
				return true
			}
		}
		return false
	})
	return recs
}

func ofType(typ coordinator.EventType) func(Record) bool {
	return func(r Record) bool { return r.Type == typ }
}

// TestAuditRecordsAndResumes drives every recorded kind of change through
// a real etcd, checks the records, stops the log, makes a change while it
// is stopped, and checks that the restarted log writes that change and
// nothing twice.
func TestAuditRecordsAndResumes(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var logs testkit.SyncBuffer
	r := start(t, co, path, &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 2})
	agentSess := testkit.Session(t, cli, 2*time.Second)
	if _, err := co.RegisterInstance(ctx, "p", agentSess.Lease(), coordinator.Instance{ID: "i1", Seats: 2}); err != nil {
		t.Fatal(err)
	}
	sess := testkit.Session(t, cli, 2*time.Second)
	released := testkit.Claim(t, co, sess, "p", coordinator.WithHolder("alice"), coordinator.WithTenant("acme"))
	if err := released.Release(ctx); err != nil {
		t.Fatal(err)
	}
	forced := testkit.Claim(t, co, sess, "p", coordinator.WithHolder("bob"))
	if _, err := co.ForceRelease(ctx, "p", forced.Seat(), forced.Token(), "stuck job"); err != nil {
		t.Fatal(err)
	}
	expiring := testkit.Session(t, cli, 2*time.Second)
	expired := testkit.Claim(t, co, expiring, "p", coordinator.WithHolder("carol"))
	etcdtest.Revoke(t, cli, expiring.Lease())
	if _, err := co.SetInstanceState(ctx, "p", "i1", coordinator.InstanceDraining); err != nil {
		t.Fatal(err)
	}
	pool, err := co.GetPool(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	spec := pool.Spec
	spec.Capacity = 3
	if _, err := co.UpdatePool(ctx, "p", spec, pool.Revision); err != nil {
		t.Fatal(err)
	}
	recs := waitFor(t, path, "spec change recorded", ofType(coordinator.EventSpecChanged))
	r.stop(t)

	var types []string
	for _, rec := range recs {
		types = append(types, string(rec.Type))
		if rec.Type == coordinator.EventSeatForceReleased && (rec.Reason != "stuck job" || rec.By == "" || rec.Holder != "bob" || rec.Token != forced.Token()) {
			t.Errorf("force-release record %+v: want holder bob, token %d, reason and who", rec, forced.Token())
		}
		if rec.Type == coordinator.EventSeatExpired && (rec.Holder != "carol" || rec.Token != expired.Token()) {
			t.Errorf("expiry record %+v: want carol's token %d", rec, expired.Token())
		}
		if rec.Type == coordinator.EventSeatClaimed && rec.Holder == "alice" && rec.Tenant != "acme" {
			t.Errorf("claim record %+v: want tenant acme", rec)
		}
	}
	want := "pool-created instance-up seat-claimed seat-released seat-claimed seat-force-released seat-claimed seat-expired instance-draining spec-changed"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("records:\n  %s\nwant:\n  %s", got, want)
	}

	// A change while the log is stopped is written after the restart, and
	// nothing already written is written again.
	if _, err := co.SetInstanceState(ctx, "p", "i1", coordinator.InstanceReady); err != nil {
		t.Fatal(err)
	}
	testkit.Claim(t, co, sess, "p", coordinator.WithHolder("dave"))
	r = start(t, co, path, &logs)
	if got, last := r.log.ResumesAfter(), recs[len(recs)-1].Revision; got != last-1 {
		t.Errorf("resumes after revision %d, want %d (before the last record's)", got, last-1)
	}
	recs = waitFor(t, path, "claim made while stopped", func(rec Record) bool { return rec.Holder == "dave" })
	r.stop(t)
	seen := map[string]bool{}
	for _, rec := range recs {
		k := fmt.Sprint(rec.Revision, rec.Type, rec.Pool, rec.Seat, rec.Instance)
		if seen[k] {
			t.Errorf("record written twice: %s", k)
		}
		seen[k] = true
	}
	if strings.Contains(logs.String(), "missed events") {
		t.Errorf("a gap was reported without compaction:\n%s", logs.String())
	}
}

// TestAuditReportsCompactionGap stops the log, makes changes, compacts
// them away, and checks that the restarted log says which revisions it
// missed, in the file and in its own log.
func TestAuditReportsCompactionGap(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var logs testkit.SyncBuffer
	r := start(t, co, path, &logs)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 5})
	recs := waitFor(t, path, "pool created", ofType(coordinator.EventPoolCreated))
	r.stop(t)
	last := recs[len(recs)-1].Revision

	sess := testkit.Session(t, cli, 2*time.Second)
	testkit.Claim(t, co, sess, "p", coordinator.WithHolder("lost"))
	// Compaction keeps the revision it is made at: write one more key, off
	// the pools, so that the claim's revision is compacted.
	if _, err := cli.Put(context.Background(), "/elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	compacted := etcdtest.Compact(t, cli)
	r = start(t, co, path, &logs)
	waitFor(t, path, "gap recorded", ofType(TypeGap))
	testkit.Claim(t, co, sess, "p", coordinator.WithHolder("after"))
	recs = waitFor(t, path, "claim after the gap", func(rec Record) bool { return rec.Holder == "after" })
	r.stop(t)
	var gap Record
	for _, rec := range recs {
		if rec.Type == TypeGap {
			gap = rec
		}
		if rec.Holder == "lost" {
			t.Errorf("a compacted event was written: %+v", rec)
		}
	}
	if gap.MissingFrom != last+1 || gap.MissingTo != compacted-1 || gap.Revision != compacted {
		t.Errorf("gap %+v: want missing %d..%d, resuming at %d", gap, last+1, compacted-1, compacted)
	}
	if !strings.Contains(logs.String(), "audit log missed events") {
		t.Errorf("no warning logged for the gap:\n%s", logs.String())
	}

	// History compacted up to the last revision written loses nothing:
	// no second gap.
	if c := etcdtest.Compact(t, cli); c != recs[len(recs)-1].Revision {
		t.Fatalf("compacted at %d, want the last record's revision %d", c, recs[len(recs)-1].Revision)
	}
	r = start(t, co, path, &logs)
	testkit.Claim(t, co, sess, "p", coordinator.WithHolder("third"))
	recs = waitFor(t, path, "claim after the second restart", func(rec Record) bool { return rec.Holder == "third" })
	r.stop(t)
	var gaps int
	for _, rec := range recs {
		if rec.Type == TypeGap {
			gaps++
		}
	}
	if gaps != 1 {
		t.Errorf("%d gaps recorded, want 1: the second restart lost nothing", gaps)
	}
}

// TestAuditResumesAcrossBrokenConnection cuts the audit log's connection
// to etcd while claims are made through another, then restores it: the
// claims made meanwhile are written once each, with no gap (etcd still
// has them).
func TestAuditResumesAcrossBrokenConnection(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	proxy := etcdtest.NewProxy(t, c.Endpoint(0))
	pcli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.URL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer pcli.Close()
	pco := testkit.Coordinator(t, pcli)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var logs testkit.SyncBuffer
	r := start(t, pco, path, &logs)
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 5})
	waitFor(t, path, "pool created", ofType(coordinator.EventPoolCreated))

	proxy.Blackhole()
	sess := testkit.Session(t, cli, 2*time.Second)
	for _, h := range []string{"during-1", "during-2"} {
		testkit.Claim(t, co, sess, "p", coordinator.WithHolder(h))
	}
	time.Sleep(200 * time.Millisecond) // let the cut watch miss them for sure
	proxy.Restore()
	recs := waitFor(t, path, "claims made while cut off", func(rec Record) bool { return rec.Holder == "during-2" })
	r.stop(t)
	n := 0
	for _, rec := range recs {
		if rec.Type == TypeGap {
			t.Errorf("gap recorded though etcd kept the history: %+v", rec)
		}
		if strings.HasPrefix(rec.Holder, "during-") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d claims made while cut off written, want 2:\n%+v", n, recs)
	}
}
