package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// chromium returns the path of a Chromium or Chrome binary, or skips the
// test (.ci/run installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium in PATH (Debian: apt-get install chromium); the web view is not tested in a browser")
	return ""
}

// artifactsDir is where tests keep files worth looking at after a run:
// $ETCDPOOL_ARTIFACTS if set, else a temporary directory.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ETCDPOOL_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWebViewInBrowser loads the web view of a real `poolagent serve` in
// headless Chromium, then claims, queues and releases seats through a real
// etcd, and checks that the page follows each change without a reload.
// It keeps a screenshot of the page with a seat held and a waiter queued.
func TestWebViewInBrowser(t *testing.T) {
	chrome := chromium(t)
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	web := testkit.FreeAddr(t)
	startAgent(t, c.Endpoint(0), `
agent:
  pools:
    - {name: w, capacity: 1}
  instances:
    - {pool: w, id: i1, address: "127.0.0.1:9001"}
`, "--web-listen", web)

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first Do starts the browser, which lives as long as bctx: no
	// timeout on it; each later step gets its own.
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+web+"/")); err != nil {
		t.Fatalf("load the page (redirected from /): %v", err)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return void(chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second)))
	}
	held := `document.querySelector('tr[data-pool="w"] [data-field="held"]')?.textContent`
	step("snapshot shown", chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="true"] tr[data-pool="w"]`)),
		until(held+` === "0"`), chromedp.WaitVisible(chromedp.CSS(`details[data-pool="w"] tr[data-instance="i1"]`)))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A holder name that is markup must show as text, not become markup.
	first, err := co.Claim(ctx, testkit.Session(t, cli, 2*time.Second), "w", coordinator.WithHolder("<i>first"), coordinator.WithTenant("acme"))
	if err != nil {
		t.Fatal(err)
	}
	step("claim shown", until(held+` === "1"`),
		until(`[...document.querySelectorAll('details[data-pool="w"] tr[data-seat]')].some(r => r.cells[1].textContent === "<i>first" && r.querySelector("i") === null && r.cells[2].textContent === "acme")`),
		until(`document.querySelector('#feed li[data-type="seat-claimed"]') !== null`))

	granted := make(chan *coordinator.Claim, 1)
	go func() {
		cl, err := co.Claim(ctx, testkit.Session(t, cli, 2*time.Second), "w", coordinator.WithHolder("second"), coordinator.WithWait())
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		granted <- cl
	}()
	step("waiter shown", chromedp.WaitVisible(chromedp.CSS(`details[data-pool="w"] tr[data-waiter="second"]`)),
		until(`document.querySelector('tr[data-pool="w"] [data-field="waiting"]').textContent === "1"`))
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactsDir(t), "webview.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-granted
	if second == nil {
		t.FailNow()
	}
	step("release and grant shown", chromedp.WaitNotPresent(chromedp.CSS(`tr[data-waiter="second"]`)),
		chromedp.WaitVisible(chromedp.CSS(`details[data-pool="w"] tr[data-holder="second"]`)),
		until(`document.querySelector('#feed li[data-type="seat-released"]') !== null`),
		until(`document.querySelector('tr[data-pool="w"] [data-field="waiting"]').textContent === "0"`))
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	step("pool empty again", until(held+` === "0"`), chromedp.WaitNotPresent(chromedp.CSS(`tr[data-seat]`)))
}

// void drops an action's value, so that it can be a step of Do.
func void[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}
