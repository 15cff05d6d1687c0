package httpapi

import (
	"testing"
	"time"
)

// SetStreamWriteTimeout sets streamWriteTimeout until the test ends. Call
// it before starting the server.
func SetStreamWriteTimeout(t testing.TB, d time.Duration) {
	old := streamWriteTimeout
	streamWriteTimeout = d
	t.Cleanup(func() { streamWriteTimeout = old })
}
