package testkit

import (
	"context"
	"net"
	"testing"
	"time"
)

// FreeAddr reserves a loopback port chosen by the OS and returns
// 127.0.0.1:port. The port is released before the caller binds it; a
// collision in that window fails the test loudly rather than silently.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatalf("testkit: reserve a port: %v", err)
	}
	return addr
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
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
