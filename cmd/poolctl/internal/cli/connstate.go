package cli

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// connChange is the etcd connection going down (Up false, with the gRPC
// state that says so) or coming back (Up true).
type connChange struct {
	Up    bool
	State connectivity.State
}

// watchConnection follows the client's gRPC connection and sends a change
// each time it leaves READY for CONNECTING or TRANSIENT_FAILURE and each
// time it is READY again. A watch on a lost connection is otherwise
// silent: the etcd client retries it in the background and resumes it
// where it stopped. stop ends the goroutine and waits for it.
func watchConnection(ctx context.Context, cli *clientv3.Client) (changes <-chan connChange, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan connChange, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		conn := cli.ActiveConnection()
		up := true // callers start once connected
		for {
			s := conn.GetState()
			switch {
			case s == connectivity.Ready && !up:
				up = true
			case (s == connectivity.Connecting || s == connectivity.TransientFailure) && up:
				up = false
			default:
				if !conn.WaitForStateChange(ctx, s) {
					return
				}
				continue
			}
			select {
			case ch <- connChange{Up: up, State: s}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, func() { cancel(); wg.Wait() }
}
