package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// One embedded etcd serves every test of the package; each test works
// under its own prefix.
var shared *testkit.Shared

func TestMain(m *testing.M) {
	os.Exit(testkit.MainWithShared(m, &shared))
}

func newClient(t testing.TB) *clientv3.Client { return shared.Client(t) }

var prefixSeq atomic.Int64

// env is one API server on 127.0.0.1 over a coordinator under a fresh
// prefix.
type env struct {
	t   testing.TB
	co  *coordinator.Coordinator
	cli *clientv3.Client
	srv *httpapi.Server
	url string
	hc  *http.Client
}

// newEnv starts a server for principals (anonymous access when none).
func newEnv(t testing.TB, principals []httpapi.Principal, opts ...httpapi.Option) *env {
	t.Helper()
	cli := newClient(t)
	co, err := coordinator.New(cli, coordinator.WithPrefix(fmt.Sprintf("/httpapi-test/%d", prefixSeq.Add(1))))
	if err != nil {
		t.Fatal(err)
	}
	if len(principals) == 0 {
		opts = append(opts, httpapi.WithAnonymous())
	}
	srv, err := httpapi.New(co, principals, opts...)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		srv.Close()
		co.Close()
	})
	return &env{t: t, co: co, cli: cli, srv: srv, url: hs.URL, hc: hs.Client()}
}

// createPool makes a pool through the library.
func (e *env) createPool(name string, spec coordinator.PoolSpec) {
	e.t.Helper()
	if _, err := e.co.CreatePool(context.Background(), name, spec); err != nil {
		e.t.Fatal(err)
	}
}

// reply is an answer: its status and JSON body.
type reply struct {
	status int
	body   map[string]any
	list   []any
	raw    string
}

func (r reply) str(k string) string { s, _ := r.body[k].(string); return s }
func (r reply) num(k string) int64  { f, _ := r.body[k].(float64); return int64(f) }

// do sends a request as the principal with token ("" for none).
func (e *env) do(method, path, token string, body any) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw)}
	if len(raw) > 0 && raw[0] == '[' {
		_ = json.Unmarshal(raw, &r.list)
	} else {
		_ = json.Unmarshal(raw, &r.body)
	}
	return r
}

// want fails the test unless r has status and, for an error, code.
func (r reply) want(t testing.TB, what string, status int, code string) reply {
	t.Helper()
	if r.status != status || (code != "" && r.str("code") != code) {
		t.Fatalf("%s: got %d %s, want %d %s", what, r.status, r.raw, status, code)
	}
	return r
}

// session opens a session as token's principal and returns its handle.
func (e *env) session(token string, ttl int) string {
	e.t.Helper()
	r := e.do("POST", "/v1/sessions", token, map[string]any{"ttl": ttl}).want(e.t, "create session", 201, "")
	return r.str("id")
}

// claim claims a seat of pool and returns the answer.
func (e *env) claim(token, pool string, body map[string]any) reply {
	e.t.Helper()
	return e.do("POST", "/v1/pools/"+pool+"/claims", token, body)
}

// releasePath is the path that releases a claim's seat.
func releasePath(pool string, seat, token int64, session string) string {
	return fmt.Sprintf("/v1/pools/%s/seats/%d?token=%d&session=%s", pool, seat, token, session)
}
