package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// benchClients is how many clients claim and release at once.
const benchClients = 16

// BenchmarkClaimRelease measures one claim and its release, by 16
// concurrent clients, through the library and through the HTTP API in the
// same run, on the same etcd. Compare their ns/op: the API's rate over the
// library's is the figure the README gives.
//
//	go test -run '^$' -bench ClaimRelease -benchtime 3000x ./internal/httpapi/
func BenchmarkClaimRelease(b *testing.B) {
	b.Run("library", benchLibrary)
	b.Run("api", benchAPI)
}

// parallel runs body on benchClients goroutines, goroutine i with its own
// index.
func parallel(b *testing.B, body func(i int, pb *testing.PB)) {
	var next atomic.Int64
	b.SetParallelism((benchClients + 1) / 2) // GOMAXPROCS is 2 here; at least 16 goroutines elsewhere
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) { body(int(next.Add(1)-1)%benchClients, pb) })
}

func benchLibrary(b *testing.B) {
	e := newEnv(b, nil)
	e.createPool("bench", coordinator.PoolSpec{Capacity: 4 * benchClients})
	ctx := context.Background()
	var sessions [benchClients]*coordinator.Session
	for i := range sessions {
		s, err := coordinator.NewSession(ctx, e.cli, coordinator.WithTTL(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close(ctx) })
		sessions[i] = s
	}
	parallel(b, func(i int, pb *testing.PB) {
		for pb.Next() {
			cl, err := e.co.Claim(ctx, sessions[i], "bench")
			if err != nil {
				b.Error(err)
				return
			}
			if err := cl.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchAPI(b *testing.B) {
	e := newEnv(b, nil)
	e.createPool("bench", coordinator.PoolSpec{Capacity: 4 * benchClients})
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchClients}}
	b.Cleanup(hc.CloseIdleConnections)
	var sessions [benchClients]string
	for i := range sessions {
		sessions[i] = e.session("", 30)
	}
	claimURL := e.url + "/v1/pools/bench/claims"
	parallel(b, func(i int, pb *testing.PB) {
		body, _ := json.Marshal(map[string]any{"session": sessions[i]})
		for pb.Next() {
			var c struct{ Seat, Token int64 }
			if err := send(hc, "POST", claimURL, body, 201, &c); err != nil {
				b.Error(err)
				return
			}
			if err := send(hc, "DELETE", e.url+releasePath("bench", c.Seat, c.Token, sessions[i]), nil, 204, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// send makes one request and decodes the answer into out.
func send(hc *http.Client, method, url string, body []byte, want int, out any) error {
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}
