package testkit

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrBelowEphemeralRange: ports the OS hands out for ":0" are also
// the source ports of outgoing connections, so a reserved port from that
// range can be taken before the test binds it (CI saw it). FreeAddr must draw
// from below the range and return a port it could bind.
func TestFreeAddrBelowEphemeralRange(t *testing.T) {
	from, to := belowEphemeral()
	for range 50 {
		addr := FreeAddr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < from || port >= to {
			t.Fatalf("FreeAddr = %s, want a port in [%d, %d)", addr, from, to)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr = %s, not bindable: %v", addr, err)
		}
		l.Close()
	}
}
