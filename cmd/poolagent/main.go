// Command poolagent runs etcdpool's agents: `poolagent dev` (an embedded
// etcd with a demo pool, for trying etcdpool with no setup), `poolagent
// serve` (registers a host's instances and keeps them registered) and
// `poolagent sidecar` (holds one seat for a Kubernetes pod).
//
// Exit codes: 0 success (including a clean shutdown on SIGINT, SIGTERM or
// SIGHUP), 1 runtime error, 2 bad configuration or usage, 3 seat lost
// (sidecar).
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

// run executes poolagent with a context that SIGINT, SIGTERM or SIGHUP
// cancels and returns the exit code. After the first signal the default
// handling is restored, so a second one kills the process. SIGHUP (a
// closed terminal, or a `kill -HUP` meant as a reload, which poolagent
// does not do) stops it cleanly too, rather than at once: Go's default
// for it is to exit, so the agent did not drain nor the sidecar release.
// A SIGHUP ignored at start (nohup, a daemon wrapper) stays ignored.
func run(args []string, stdout, stderr io.Writer) int {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) { // under nohup a hangup stays ignored
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	defer stop()
	context.AfterFunc(ctx, stop)
	return command.Execute(ctx, args, command.Streams{Out: stdout, Err: stderr, LookupEnv: os.LookupEnv})
}
