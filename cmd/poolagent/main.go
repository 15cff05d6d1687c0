// Command poolagent runs etcdpool's agents: `poolagent dev` (an embedded
// etcd with a demo pool, for trying etcdpool with no setup), `poolagent
// serve` (registers a host's instances and keeps them registered) and
// `poolagent sidecar` (holds one seat for a Kubernetes pod).
//
// Exit codes: 0 success (including a clean shutdown on SIGINT or SIGTERM),
// 1 runtime error, 2 bad configuration or usage, 3 seat lost (sidecar).
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/etcdpool/etcdpool/cmd/poolagent/internal/command"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes poolagent with a context that SIGINT or SIGTERM cancels and
// returns the exit code. After the first signal the default handling is
// restored, so a second one kills the process.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	return command.Execute(ctx, args, command.Streams{Out: stdout, Err: stderr, LookupEnv: os.LookupEnv})
}
