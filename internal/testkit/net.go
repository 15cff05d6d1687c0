package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FreeAddr reserves a free loopback port and returns 127.0.0.1:port. The
// port is released before the caller binds it.
//
// The port is drawn at random from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range). Ports the OS picks for ":0" come from that
// range, and so do the source ports of every outgoing connection, so a port
// picked by the OS is often taken by some client's connection (in parallel
// test packages) before the caller binds it. Below the range only another
// explicit listener can take it. A collision in the remaining window still
// fails loudly (embedetcd.ErrAddrInUse); etcdtest retries it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatalf("testkit: reserve a port: %v", err)
	}
	return addr
}

// belowEphemeral is the range FreeAddr draws from: [lo/2, lo) where lo is
// the low end of the ephemeral range, so 16384-32767 by default.
func belowEphemeral() (from, to int) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				lo = n
			}
		}
	}
	return lo / 2, lo
}

func freeAddr() (string, error) {
	from, to := belowEphemeral()
	for range 64 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(from+rand.IntN(to-from)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("no free port below the ephemeral range, and: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Ctx returns a context that ends after d or when the test ends.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
