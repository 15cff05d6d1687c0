// Package command holds poolagent's subcommands, one file per verb, each
// with its options struct and a run method, so that every command can be
// run in-process with injected streams.
package command

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Streams are the process's outputs and environment, injected for tests.
type Streams struct {
	// Out receives command output (help, the dev banner).
	Out io.Writer
	// Err receives logs and errors.
	Err io.Writer
	// LookupEnv reads the environment, like os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Execute runs poolagent with args and returns the exit code. ctx ends on
// SIGINT, SIGTERM or SIGHUP, which every command treats as a request to
// shut down cleanly.
func Execute(ctx context.Context, args []string, s Streams) int {
	root := NewRootCommand(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintf(s.Err, "poolagent: %v\n", err)
		if ExitCode(err) == ExitUsage {
			fmt.Fprintln(s.Err, "Run 'poolagent --help' for usage.")
		}
	}
	return ExitCode(err)
}

// NewRootCommand returns the poolagent command with its subcommands.
func NewRootCommand(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "poolagent",
		Short:         "Seat manager agent for worker pools on etcd",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("missing command: dev, serve or sidecar")}
		},
	}
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(NewDevCommand(s), NewServeCommand(s), NewSidecarCommand(s))
	return root
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%q takes no arguments, got %q", cmd.CommandPath(), args)}
	}
	return nil
}
