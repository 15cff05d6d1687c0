package main

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/testkit"
)

// The examples of examples/ are clients of the HTTP API in other
// languages. They run here against a real `poolagent dev` process and
// exit non-zero on any wrong answer; the Java one is skipped only where no
// JDK is installed (.ci/run installs one).
func TestAPIExamplesAgainstDev(t *testing.T) {
	t.Parallel() // with the other API process tests: they wait on timers and processes, not CPU
	api := testkit.FreeAddr(t)
	startProc(t, "dev", "dev", "--data-dir", t.TempDir(), "--listen-client", testkit.FreeAddr(t), "--listen-peer", testkit.FreeAddr(t),
		"--listen", testkit.FreeAddr(t), "--api-listen", api, "--pool", "support", "--capacity", "20", "--instances", "5", "--seats", "4")
	url := "http://" + api
	testkit.Eventually(t, 30*time.Second, "dev's HTTP API", func() bool {
		return httpStatus(url+"/v1/pools/support/instances") == http.StatusOK
	})
	t.Run("python court hearing", func(t *testing.T) {
		t.Parallel()
		runExample(t, "python3", "../../examples/python/court_hearing.py", url)
	})
	t.Run("java support bots", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("java"); err != nil {
			t.Skip("java is not installed (apt-get install default-jdk-headless; .ci/run does): the Java example did not run")
		}
		runExample(t, "java", "../../examples/java/SupportBots.java", url)
	})
}

// runExample runs an example program and fails the test when it exits
// non-zero, showing its output.
func runExample(t *testing.T, prog string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, prog, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	t.Logf("%s ran in %v:\n%s", prog, time.Since(start).Round(time.Millisecond), out)
}

// serve refuses at startup to serve the API over plain HTTP anywhere but
// loopback, and says what to do.
func TestServeRefusesPlainHTTPAPIOffLoopback(t *testing.T) {
	cfg := testkit.WriteFile(t, "api.yaml", `agent:
  instances:
    - {pool: p, id: i1}
api:
  listen: 0.0.0.0:8480
  principals:
    - {name: court, tokenSHA256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, pools: ["*"], operations: [claim]}
`)
	p := startProc(t, "serve", "serve", "--endpoints", "127.0.0.1:1", "--config", cfg)
	if code := p.wait(t, 15*time.Second); code != 2 {
		t.Errorf("exit code %d, want 2 (bad configuration)", code)
	}
	if msg := p.stderr.String(); !strings.Contains(msg, "api.listen") || !strings.Contains(msg, "not a loopback address") || !strings.Contains(msg, "api.tls.certFile") {
		t.Errorf("stderr does not explain the refusal:\n%s", msg)
	}
}
