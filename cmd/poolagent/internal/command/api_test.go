package command

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/internal/etcdtest"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// The API closes a keep-alive connection that sends no request for
// apiIdleTimeout, so that idle clients, or unauthenticated ones, cannot
// hold its sockets for good. Found by a review (2026-12-05): one 401 and
// the connection was kept for ever.
func TestAPIClosesIdleConnections(t *testing.T) {
	old := apiIdleTimeout
	apiIdleTimeout = 300 * time.Millisecond
	t.Cleanup(func() { apiIdleTimeout = old })
	co := testkit.Coordinator(t, etcdtest.Start(t).Client(t))
	srv, err := httpapi.New(co, []httpapi.Principal{{Name: "a", TokenSHA256: httpapi.HashToken("tok"), Pools: []string{"*"}, Operations: []httpapi.Operation{httpapi.OpAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveAPI(ln, srv.Handler())
	defer stop()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/pools HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d; want 401", resp.StatusCode)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read on the idle connection: %v; want EOF, the server having closed it", err)
	}
}
