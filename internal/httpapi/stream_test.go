package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/httpapi"
	"github.com/etcdpool/etcdpool/internal/testkit"
)

// A client that opens a pool's event stream and stops reading, keeping
// the connection open, is dropped once a write to it has been blocked for
// the stream write timeout: until then its events pile up in the server.
// Found by a review (2026-12-05): such a reader of a busy pool held 22 MiB
// of the server's heap after 12,000 events, and growing.
func TestStalledStreamDropped(t *testing.T) {
	httpapi.SetStreamWriteTimeout(t, 300*time.Millisecond)
	e := newEnv(t, nil)
	e.createPool("p", coordinator.PoolSpec{Capacity: 1})
	// Small send buffers, so that a reader that stops reading blocks the
	// server's writes after a few KB, not a few MB of the kernel's.
	hs := httptest.NewUnstartedServer(e.srv.Handler())
	hs.Listener = smallSendBuffers{hs.Listener}
	hs.Start()
	defer hs.Close()
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /v1/pools/p/events HTTP/1.1\r\nHost: x\r\n\r\n")
	// Events, big ones, until the server's writes to the reader block and
	// well past the timeout.
	s := testkit.Session(t, e.cli, 30*time.Second)
	holder := coordinator.WithHolder(strings.Repeat("h", 250))
	for start := time.Now(); time.Since(start) < 2*time.Second; {
		cl, err := e.co.Claim(context.Background(), s, "p", holder)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The server has hung up: what it sent before drains, then EOF.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, conn)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the stalled stream is still open 10 s after its reader resumed (%d bytes read): the server never dropped it", n)
	}
}

// smallSendBuffers makes the sockets it accepts send from 4 KiB buffers.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}
