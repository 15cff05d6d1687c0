package command

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// TestLossStreamClosedOnStop: a loss stream ends with a "closed" event when
// its replica stops, as the README says. Found by a review (2026-12-05):
// poolagent cancels every request first, and the stream ended with no
// event at all.
func TestLossStreamClosedOnStop(t *testing.T) {
	c := etcdtest.Start(t)
	co := testkit.Coordinator(t, c.Client(t))
	testkit.CreatePool(t, co, "p", coordinator.PoolSpec{Capacity: 1})
	srv, err := httpapi.New(co, nil, httpapi.WithAnonymous())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopHTTP := serveAPI(ln, srv.Handler())
	url := "http://" + ln.Addr().String()
	post := func(path, body string, out any) {
		r, err := http.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		_ = json.NewDecoder(r.Body).Decode(out)
	}
	var sess struct{ ID string }
	post("/v1/sessions", `{"ttl":10}`, &sess)
	var cl struct {
		Seat  int
		Token int64
	}
	post("/v1/pools/p/claims", fmt.Sprintf(`{"session":%q}`, sess.ID), &cl)
	resp, err := http.Get(fmt.Sprintf("%s/v1/pools/p/seats/%d/events?token=%d&session=%s", url, cl.Seat, cl.Token, sess.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	var events []string
	read := func() {
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				events = append(events, "EOF")
				return
			}
			if ev, ok := strings.CutPrefix(strings.TrimSpace(line), "event: "); ok {
				events = append(events, ev)
				return
			}
		}
	}
	read() // held
	go func() { time.Sleep(200 * time.Millisecond); _ = stopHTTP(); srv.Close() }()
	read()
	t.Logf("events: %v", events)
	if events[len(events)-1] != "closed" {
		t.Fatalf("the stream ended with %v, not a \"closed\" event", events)
	}
}
