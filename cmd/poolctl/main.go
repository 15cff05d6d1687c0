// Command poolctl is the operator CLI for etcdpool: it creates and resizes
// pools, shows seats, instances and queues, force-releases seats, drains
// instances, streams events, and runs a command while holding a seat.
package main

import (
	"os"

	"github.com/etcdpool/etcdpool/cmd/poolctl/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], cli.SystemEnv())) }
