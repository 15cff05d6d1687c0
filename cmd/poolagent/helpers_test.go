package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// These tests run the poolagent binary, built once by TestMain, as real
// processes against real etcd servers on 127.0.0.1, and send real signals.

var (
	binPath     string
	raceEnabled bool // set by race_test.go
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "poolagent-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "poolagent")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build poolagent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running poolagent process.
type proc struct {
	name     string
	cmd      *exec.Cmd
	stdout   testkit.SyncBuffer
	stderr   testkit.SyncBuffer
	done     chan struct{}
	exitCode int
}

// startProc starts poolagent with args. When the test ends the process is
// killed if still running, and its stderr is logged if the test failed.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(binPath, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// No 1s sleep at exit in race builds, so exit timings are the agent's own.
	p.cmd.Env = append(os.Environ(), "POD_NAME=", "POD_NAMESPACE=", "GORACE=atexit_sleep_ms=0")
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.exitCode = ee.ExitCode()
		default:
			p.exitCode = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// wait waits up to d for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(d):
		t.Fatalf("%s still running %v later; stderr:\n%s", p.name, d, p.stderr.String())
		return 0
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// httpStatus returns the status of GET url, or 0 if it cannot connect.
func httpStatus(url string) int {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func seats(t *testing.T, co *coordinator.Coordinator, pool string) []coordinator.Seat {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := co.Seats(ctx, pool)
	if err != nil {
		t.Fatalf("seats of %s: %v", pool, err)
	}
	return s
}

func instances(t *testing.T, co *coordinator.Coordinator, pool string) []coordinator.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ins, err := co.Instances(ctx, pool)
	if err != nil {
		t.Fatalf("instances of %s: %v", pool, err)
	}
	return ins
}

func queueLen(t *testing.T, co *coordinator.Coordinator, pool string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q, err := co.Queue(ctx, pool)
	if err != nil {
		t.Fatalf("queue of %s: %v", pool, err)
	}
	return len(q)
}

// heldBy returns the seat held by holder, if any.
func heldBy(ss []coordinator.Seat, holder string) (coordinator.Seat, bool) {
	for _, s := range ss {
		if s.Holder == holder {
			return s, true
		}
	}
	return coordinator.Seat{}, false
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
