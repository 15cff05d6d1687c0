package readme

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite README.md's transcript blocks from testdata/transcript.txt")

const (
	scriptPath = "testdata/transcript.txt"
	readmePath = "../../README.md"
)

// TestREADMEShowsTheScript: every README block marked
// `<!-- transcript: NAME -->` is the script's block NAME, and every block
// of the script is in the README.
func TestREADMEShowsTheScript(t *testing.T) {
	steps, err := parseScript(scriptPath)
	if err != nil {
		t.Fatal(err)
	}
	want := blocks(steps, jobCommands(steps))
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	got, rewritten := readmeBlocks(string(readme), want)
	if *update {
		if err := os.WriteFile(readmePath, []byte(rewritten), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for name, w := range want {
		switch g, ok := got[name]; {
		case !ok:
			t.Errorf("README has no block <!-- transcript: %s -->", name)
		case g != w:
			t.Errorf("README block %s differs from %s (go test ./internal/readme -update rewrites it):\n--- README\n%s--- script\n%s", name, scriptPath, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("README block %s is not in %s", name, scriptPath)
		}
	}
}

var marker = regexp.MustCompile("(?m)^<!-- transcript: ([\\w-]+) -->\n```console\n((?s:.*?))```\n")

// readmeBlocks returns the marked blocks of readme, and readme with each
// marked block replaced by want's.
func readmeBlocks(readme string, want map[string]string) (map[string]string, string) {
	got := map[string]string{}
	rewritten := marker.ReplaceAllStringFunc(readme, func(m string) string {
		sub := marker.FindStringSubmatch(m)
		got[sub[1]] = sub[2]
		if w, ok := want[sub[1]]; ok {
			return "<!-- transcript: " + sub[1] + " -->\n```console\n" + w + "```\n"
		}
		return m
	})
	return got, rewritten
}

func jobCommands(steps []step) map[string]string {
	jobs := map[string]string{}
	for _, s := range steps {
		if s.kind == "bg" {
			jobs[s.job] = s.args
		}
	}
	return jobs
}

// TestTranscript replays the script against `poolagent dev` and poolctl.
func TestTranscript(t *testing.T) {
	steps, err := parseScript(scriptPath)
	if err != nil {
		t.Fatal(err)
	}
	r := newReplay(t)
	for _, s := range steps {
		if t.Failed() {
			return
		}
		r.step(s)
	}
}

// replay holds the binaries, the dev etcd and the background jobs.
type replay struct {
	t        *testing.T
	dir      string
	poolctl  string
	endpoint string
	host     string
	vars     map[string]string
	jobs     map[string]*job
}

type job struct {
	args string
	cmd  *exec.Cmd
	out  string
	done chan struct{}
	code int
}

func newReplay(t *testing.T) *replay {
	dir := t.TempDir()
	host, _ := os.Hostname()
	r := &replay{t: t, dir: dir, host: host, vars: map[string]string{}, jobs: map[string]*job{}}
	var poolagent string
	var wg sync.WaitGroup
	wg.Go(func() { r.poolctl = build(t, dir, "poolctl", false) })
	wg.Go(func() { poolagent = build(t, dir, "poolagent", raceEnabled) })
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	client := testkit.FreeAddr(t)
	r.endpoint = "http://" + client
	dev := r.start("dev", poolagent, "dev", "--data-dir", filepath.Join(dir, "data"), "--listen-client", client,
		"--listen-peer", testkit.FreeAddr(t), "--listen", testkit.FreeAddr(t), "--log-level", "warn")
	t.Cleanup(func() { r.stopAll(); _ = dev })
	r.await("demo-1", "instances demo")
	return r
}

// build builds ./cmd/NAME into dir, with -race when race is set (as the
// package's own tests build it, so the build cache serves both).
func build(t *testing.T, dir, name string, race bool) string {
	bin := filepath.Join(dir, name)
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, "../../cmd/"+name)...).CombinedOutput(); err != nil {
		t.Errorf("go build %s: %v\n%s", name, err, out) // not Fatal: called off the test's goroutine
	}
	return bin
}

func (r *replay) env() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ETCDPOOL_") {
			env = append(env, e)
		}
	}
	return append(env, "ETCDPOOL_ENDPOINTS="+r.endpoint)
}

func (r *replay) words(line string) []string {
	w, err := splitWords(bind(line, r.vars))
	if err != nil {
		r.t.Fatal(err)
	}
	return w
}

// start runs bin in the background, its stdout and stderr in one file.
func (r *replay) start(name, bin string, args ...string) *job {
	j := &job{out: filepath.Join(r.dir, name+".out"), done: make(chan struct{})}
	f, err := os.Create(j.out)
	if err != nil {
		r.t.Fatal(err)
	}
	j.cmd = exec.Command(bin, args...)
	j.cmd.Env, j.cmd.Stdout, j.cmd.Stderr = r.env(), f, f
	if err := j.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() {
		_ = j.cmd.Wait()
		f.Close()
		j.code = j.cmd.ProcessState.ExitCode()
		close(j.done)
	}()
	r.jobs[name] = j
	return j
}

func (r *replay) stopAll() {
	for _, j := range r.jobs {
		_ = j.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-j.done:
		case <-time.After(10 * time.Second):
			_ = j.cmd.Process.Kill()
			<-j.done
		}
	}
}

// run runs poolctl and returns its output lines and exit code.
func (r *replay) run(args string) ([]string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.poolctl, r.words(args)...)
	cmd.Env = r.env()
	out, _ := cmd.CombinedOutput()
	return trimBlank(strings.Split(string(out), "\n")), cmd.ProcessState.ExitCode()
}

func (r *replay) await(text, args string) []string {
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := r.run(args)
		if strings.Contains(strings.Join(out, "\n"), bind(text, r.vars)) {
			return out
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("poolctl %s: no %q within 15s; last output:\n%s", args, text, strings.Join(out, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// until runs poolctl until j's output has text, giving each run 3s
// to show there.
func (r *replay) until(j *job, text, args string) {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		r.run(args)
		for wait := time.Now().Add(3 * time.Second); time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
			if b, _ := os.ReadFile(j.out); strings.Contains(string(b), text) {
				return
			}
		}
	}
	r.t.Fatalf("the output of %s shows no %q after poolctl %s for 15s", j.args, text, args)
}

func (r *replay) step(s step) {
	t := r.t
	switch s.kind {
	case "bg":
		r.start(s.job, r.poolctl, r.words(s.args)...).args = s.args
	case "stop":
		j := r.job(s)
		_ = j.cmd.Process.Signal(syscall.SIGINT)
		<-j.done
	case "wait":
		r.wait(s)
	case "await":
		r.await(s.text, s.args)
	case "until":
		r.until(r.job(s), s.text, s.args)
	case "let":
		out, _ := r.run(s.args)
		m := regexp.MustCompile(s.text).FindStringSubmatch(strings.Join(out, "\n"))
		if m == nil {
			t.Fatalf("line %d: %q not in the output of poolctl %s:\n%s", s.line, s.text, s.args, strings.Join(out, "\n"))
		}
		r.vars[s.job] = m[1]
	case "run":
		r.run(s.args)
	case "$":
		out, code := r.run(s.args)
		r.compare(s, out, code, false)
	case "=", "=~":
		j := r.wait(s)
		b, _ := os.ReadFile(j.out)
		r.compare(s, trimBlank(strings.Split(string(b), "\n")), j.code, s.kind == "=~")
	}
}

// wait waits up to 30s for s's job to exit.
func (r *replay) wait(s step) *job {
	j := r.job(s)
	select {
	case <-j.done:
	case <-time.After(30 * time.Second):
		r.t.Fatalf("line %d: job %s still runs", s.line, s.job)
	}
	return j
}

func (r *replay) job(s step) *job {
	j, ok := r.jobs[s.job]
	if !ok {
		r.t.Fatalf("line %d: no job %s", s.line, s.job)
	}
	return j
}

func (r *replay) compare(s step, out []string, code int, unordered bool) {
	want := make([]string, len(s.output))
	for i, o := range s.output {
		want[i] = bind(o, r.vars)
	}
	got, exp := normalize(out, r.host), normalize(want, r.host)
	if unordered {
		slices.Sort(got)
		slices.Sort(exp)
		got, exp = slices.Compact(got), slices.Compact(exp)
	}
	if !slices.Equal(got, exp) || code != s.exit {
		r.t.Errorf("%s:%d: poolctl %s\n--- got (exit %d)\n%s\n--- want (exit %d)\n%s\n--- normalised got\n%s\n--- normalised want\n%s",
			scriptPath, s.line, s.args+s.job, code, strings.Join(out, "\n"), s.exit, strings.Join(want, "\n"),
			strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
}
