package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sse reads server-sent events.
type sse struct {
	r    *bufio.Reader
	body io.Closer
}

func openEvents(t *testing.T, url string) *sse {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %s, content type %q", resp.Status, ct)
	}
	return &sse{r: bufio.NewReader(resp.Body), body: resp.Body}
}

// next returns the next event's name and data; "" at the end of the stream.
func (s *sse) next(t *testing.T) (string, string) {
	t.Helper()
	var event, data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", ""
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && event != "":
			return event, data
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// until reads events until one named name satisfies ok.
func (s *sse) until(t *testing.T, name string, ok func(data string) bool) string {
	t.Helper()
	for {
		ev, data := s.next(t)
		if ev == "" {
			t.Fatalf("stream ended waiting for %s", name)
		}
		if ev == name && ok(data) {
			return data
		}
	}
}

func poolView(t *testing.T, data string) PoolView {
	t.Helper()
	var v PoolView
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestHubStreams checks the stream a page reads, against a real etcd: a
// snapshot, then each change and a fresh view of the pool it touched; a
// burst of claims read once; a deleted pool; and the stream ending when
// the hub stops.
func TestHubStreams(t *testing.T) {
	c := etcdtest.Start(t)
	cli := c.Client(t)
	co := testkit.Coordinator(t, cli)
	testkit.CreatePool(t, co, "a", coordinator.PoolSpec{Capacity: 20})
	testkit.CreatePool(t, co, "hidden", coordinator.PoolSpec{Capacity: 1})
	hub := NewHub(co, []string{"a", "b"}, 5*time.Second, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); hub.Run(ctx) }()
	srv := httptest.NewServer(Handler(hub))
	defer srv.Close()
	defer func() { cancel(); <-ran }()

	s := openEvents(t, srv.URL+Path+"events")
	defer s.body.Close()
	ev, data := s.next(t)
	var snap Snapshot
	if err := json.Unmarshal([]byte(data), &snap); ev != "snapshot" || err != nil || len(snap.Pools) != 1 || snap.Pools[0].Name != "a" {
		t.Fatalf("first event %s %s (%v): want a snapshot of pool a only", ev, data, err)
	}

	sess := testkit.Session(t, cli, 2*time.Second)
	const burst = 10
	for i := range burst {
		testkit.Claim(t, co, sess, "a", coordinator.WithHolder("h"+string(rune('0'+i))))
	}
	testkit.Claim(t, co, testkit.Session(t, cli, 2*time.Second), "hidden")
	changes, views := 0, 0
	for {
		ev, data := s.next(t)
		if ev == "change" {
			changes++
			if strings.Contains(data, `"hidden"`) {
				t.Fatalf("change of a pool the hub does not show: %s", data)
			}
		}
		if ev == "pool" {
			views++
			if v := poolView(t, data); len(v.Seats) == burst && v.Status.Held == burst {
				break
			}
		}
	}
	if changes != burst || views >= burst {
		t.Errorf("%d changes and %d pool views for a burst of %d claims: want every change and fewer views", changes, views, burst)
	}

	testkit.CreatePool(t, co, "b", coordinator.PoolSpec{Capacity: 1})
	s.until(t, "pool", func(d string) bool { v := poolView(t, d); return v.Name == "b" && !v.Deleted })
	if err := co.DeletePool(context.Background(), "b", false); err != nil {
		t.Fatal(err)
	}
	s.until(t, "pool", func(d string) bool { v := poolView(t, d); return v.Name == "b" && v.Deleted })

	cancel()
	<-ran
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for ev, _ := s.next(t); ev != ""; ev, _ = s.next(t) {
		}
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the page's stream did not end when the hub stopped")
	}
	resp, err := http.Get(srv.URL + Path + "events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("events after the hub stopped: %s, want 503", resp.Status)
	}
}

// TestPageAssets checks that the page and its assets are served from the
// binary with a policy that forbids anything else.
func TestPageAssets(t *testing.T) {
	srv := httptest.NewServer(Handler(NewHub(nil, nil, time.Second, slog.New(slog.DiscardHandler))))
	defer srv.Close()
	for path, want := range map[string]string{"": "<title>etcdpool</title>", "app.js": "EventSource", "style.css": ".bar"} {
		resp, err := http.Get(srv.URL + Path + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %s, body lacks %q", Path+path, resp.Status, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", Path+path, csp)
		}
		if strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
			t.Errorf("%s refers to an external URL", Path+path)
		}
	}
	resp, err := http.Post(srv.URL+Path, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %s, want 405", Path, resp.Status)
	}
}
