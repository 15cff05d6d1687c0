package cli

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == guardArg {
		// run re-executes this binary (/proc/self/exe) as its guard.
		os.Exit(runGuard(os.Args[2:]))
	}
	code := m.Run()
	if code == 0 {
		// Stopped members of a 3-member embedded cluster (TestNoQuorum)
		// leave etcd's peer HTTP connections behind; poolctl has no HTTP.
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
			goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testNow is the injected clock of in-process runs.
var testNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// harness is one real etcd plus a Coordinator the test uses to set the
// scene (claims, instances) that poolctl then inspects.
type harness struct {
	t   *testing.T
	eps string
	cli *clientv3.Client
	c   *coordinator.Coordinator
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	cluster := etcdtest.Start(t)
	cli := cluster.Client(t)
	return &harness{t: t, eps: strings.Join(cluster.Endpoints(), ","), cli: cli, c: testkit.Coordinator(t, cli)}
}

// result is one in-process poolctl invocation.
type result struct {
	code     int
	out, err string
}

// fakeSignals lets a test deliver signals to an in-process Main.
type fakeSignals struct {
	mu   sync.Mutex
	subs map[chan<- os.Signal][]os.Signal
}

func (f *fakeSignals) notify(c chan<- os.Signal, sigs ...os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[chan<- os.Signal][]os.Signal{}
	}
	f.subs[c] = append(f.subs[c], sigs...)
}

func (f *fakeSignals) stop(c chan<- os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, c)
}

// send delivers sig, as signal.Notify does, to every channel subscribed
// to it, once Main has subscribed one.
func (f *fakeSignals) send(t testing.TB, sig os.Signal) {
	t.Helper()
	var to []chan<- os.Signal
	testkit.Eventually(t, 5*time.Second, "signal subscription", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		to = nil
		for c, sigs := range f.subs {
			if slices.Contains(sigs, sig) {
				to = append(to, c)
			}
		}
		return len(to) > 0
	})
	for _, c := range to {
		c <- sig
	}
}

// invocation is an Env under test control.
type invocation struct {
	env  *Env
	out  *testkit.SyncBuffer
	err  *testkit.SyncBuffer
	sigs *fakeSignals
	vars map[string]string
}

func newInvocation() *invocation {
	inv := &invocation{out: &testkit.SyncBuffer{}, err: &testkit.SyncBuffer{}, sigs: &fakeSignals{}, vars: map[string]string{}}
	inv.env = &Env{
		Out: inv.out, ErrOut: inv.err,
		Getenv:  func(k string) string { return inv.vars[k] },
		Environ: func() []string { return environ(inv.vars) },
		Now:     func() time.Time { return testNow },
		Notify:  inv.sigs.notify, StopNotify: inv.sigs.stop,
		ReadPassword: func(string) (string, error) { return "", fmt.Errorf("no terminal in tests") },
	}
	return inv
}

func environ(vars map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// run runs poolctl in-process against the harness's etcd.
func (h *harness) run(args ...string) result {
	return h.runWith(newInvocation(), args...)
}

func (h *harness) runWith(inv *invocation, args ...string) result {
	h.t.Helper()
	code := Main(append([]string{"--endpoints", h.eps}, args...), inv.env)
	return result{code: code, out: inv.out.String(), err: inv.err.String()}
}

// start runs poolctl in the background; wait returns its result.
func (h *harness) start(inv *invocation, args ...string) (wait func() result) {
	done := make(chan result, 1)
	go func() {
		code := Main(append([]string{"--endpoints", h.eps}, args...), inv.env)
		done <- result{code: code, out: inv.out.String(), err: inv.err.String()}
	}()
	return func() result {
		select {
		case r := <-done:
			return r
		case <-time.After(60 * time.Second):
			h.t.Fatalf("poolctl %v did not return within 60s", args)
			return result{}
		}
	}
}

// want checks the exit code, and that a failure printed exactly one line
// and nothing on stdout.
func (r result) want(t testing.TB, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.err)
	}
	if code == ExitOK || code == ExitInterrupted {
		return
	}
	if n := strings.Count(r.err, "\n"); n != 1 || !strings.HasPrefix(r.err, "poolctl: ") {
		t.Fatalf("stderr must be one line starting with \"poolctl: \", got %d lines:\n%s", n, r.err)
	}
}

func (h *harness) createPool(name string, spec coordinator.PoolSpec) {
	h.t.Helper()
	testkit.CreatePool(h.t, h.c, name, spec)
}

func (h *harness) session(ttl time.Duration) *coordinator.Session {
	h.t.Helper()
	return testkit.Session(h.t, h.cli, ttl)
}

func (h *harness) claim(pool string, opts ...coordinator.ClaimOption) *coordinator.Claim {
	h.t.Helper()
	return testkit.Claim(h.t, h.c, h.session(10*time.Second), pool, opts...)
}

// golden compares got with testdata/name.golden, or rewrites it with -update.
func golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// mask replaces the cells of the named columns of a table with "*" and
// re-aligns it. It splits rows at the header's column starts, so it also
// checks that every cell sits under its header.
func mask(t testing.TB, table string, cols ...string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	header := lines[0]
	var starts []int
	for i := 0; i < len(header); i++ {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	masked := map[int]bool{}
	for i, name := range strings.Fields(header) {
		for _, c := range cols {
			masked[i] = masked[i] || name == c
		}
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 8, 3, ' ', 0)
	for _, line := range lines {
		cells := splitAt(line, starts)
		if line != lines[0] {
			for i := range cells {
				if masked[i] {
					cells[i] = "*"
				}
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
	return b.String()
}

func splitAt(line string, starts []int) []string {
	cells := make([]string, len(starts))
	for i, s := range starts {
		end := len(line)
		if i+1 < len(starts) {
			end = min(starts[i+1], len(line))
		}
		if s < len(line) {
			cells[i] = strings.TrimSpace(line[s:end])
		}
	}
	return cells
}

var revisionRE = regexp.MustCompile(`revision: \d+`)

var clockRE = regexp.MustCompile(`\b\d\d:\d\d:\d\d\.\d\d\d\b`)

// maskClock replaces the TIME cells of a watch stream, keeping the width.
func maskClock(s string) string { return clockRE.ReplaceAllString(s, "HH:MM:SS.mmm") }

// sortRows sorts a table's rows, keeping the header first.
func sortRows(table string) string {
	ls := strings.Split(strings.TrimRight(table, "\n"), "\n")
	slices.Sort(ls[1:])
	return strings.Join(ls, "\n") + "\n"
}

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if sc.Text() != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}
