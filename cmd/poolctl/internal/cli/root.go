package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Defaults of the global flags.
const (
	defaultEndpoint       = "127.0.0.1:2379"
	defaultDialTimeout    = 2 * time.Second
	defaultCommandTimeout = 5 * time.Second
)

// globalOptions are the flags every command shares. One value per
// invocation, bound to the root command's persistent flags.
type globalOptions struct {
	env  *Env
	sigs *signalRouter

	Endpoints      []string
	Prefix         string
	CACert         string
	Cert           string
	Key            string
	User           string
	DialTimeout    time.Duration
	CommandTimeout time.Duration
	Output         string
	NoHeaders      bool
}

// newRootCommand builds the poolctl command tree for one invocation.
func newRootCommand(env *Env, sigs *signalRouter) *cobra.Command {
	g := &globalOptions{env: env, sigs: sigs}
	root := &cobra.Command{
		Use:   "poolctl",
		Short: "Operate etcdpool seat pools",
		Long: "poolctl manages etcdpool pools: create and resize them, inspect seats, instances\n" +
			"and queues, force-release seats, drain instances, stream events, and run a\n" +
			"command while holding a seat.\n\n" + exitCodeHelp(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		PersistentPreRunE: ran(func(*cobra.Command, []string) error { return g.validate() }),
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError("%w", err) })
	g.addFlags(root)
	root.AddCommand(
		newPoolCommand(g), newSeatsCommand(g), newInstancesCommand(g), newQueueCommand(g),
		newReleaseCommand(g), newDrainCommand(g, coordinator.InstanceDraining),
		newDrainCommand(g, coordinator.InstanceReady), newWatchCommand(g), newRunCommand(g),
		newStatusCommand(g), newCompletionCommand(), newVersionCommand(g),
	)
	return root
}

func (g *globalOptions) addFlags(root *cobra.Command) {
	eps := []string{defaultEndpoint}
	if v := g.env.Getenv("ETCDPOOL_ENDPOINTS"); v != "" {
		eps = strings.Split(v, ",")
	}
	f := root.PersistentFlags()
	f.StringSliceVar(&g.Endpoints, "endpoints", eps, "etcd endpoints, comma-separated (env ETCDPOOL_ENDPOINTS)")
	f.StringVar(&g.Prefix, "prefix", coordinator.DefaultPrefix, "root prefix of etcdpool's keys")
	f.StringVar(&g.CACert, "cacert", "", "verify the etcd server with this CA bundle (PEM)")
	f.StringVar(&g.Cert, "cert", "", "client certificate (PEM) for TLS; needs --key")
	f.StringVar(&g.Key, "key", "", "client private key (PEM) for TLS; needs --cert")
	f.StringVar(&g.User, "user", "", "etcd user as user:password, or user alone to take the password from ETCDPOOL_PASSWORD or a prompt")
	f.DurationVar(&g.DialTimeout, "dial-timeout", defaultDialTimeout, "how long to wait for a connection to etcd")
	f.DurationVar(&g.CommandTimeout, "command-timeout", defaultCommandTimeout, "bound on each command's etcd requests (not on run's or watch's lifetime)")
	f.StringVarP(&g.Output, "output", "o", "table", "output format: table, json or yaml")
	f.BoolVar(&g.NoHeaders, "no-headers", false, "omit table headers")
}

// validate checks the global flags before any command connects.
func (g *globalOptions) validate() error {
	switch g.Output {
	case "table", "json", "yaml":
	default:
		return usageError("--output %q: want table, json or yaml", g.Output)
	}
	if len(g.Endpoints) == 0 {
		return usageError("--endpoints: at least one endpoint is required")
	}
	for _, ep := range g.Endpoints {
		if strings.TrimSpace(ep) == "" {
			return usageError("--endpoints: empty endpoint in %q", strings.Join(g.Endpoints, ","))
		}
	}
	if err := checkPrefix(g.Prefix); err != nil {
		return err
	}
	if g.DialTimeout <= 0 || g.CommandTimeout <= 0 {
		return usageError("--dial-timeout and --command-timeout must be positive")
	}
	if (g.Cert == "") != (g.Key == "") {
		return usageError("--cert and --key go together")
	}
	if g.tls() {
		for _, ep := range g.Endpoints {
			if strings.HasPrefix(ep, "http://") {
				return usageError("endpoint %q is plain http:// but TLS flags are set; use https:// or host:port", ep)
			}
		}
	}
	return nil
}

func (g *globalOptions) tls() bool { return g.CACert != "" || g.Cert != "" }

// command is what every verb's Options implements, kubectl style.
type command interface {
	// Complete fills the options from arguments and flags.
	Complete(cmd *cobra.Command, args []string) error
	// Validate checks them; every error it returns is bad usage.
	Validate() error
	// Run does the work.
	Run(ctx context.Context) error
}

// runE adapts a command to cobra. Validate errors are usage errors. Every
// error it returns is marked errRan, so that Main can tell cobra's own
// errors (unknown command or flag, missing argument: all bad usage) apart.
func runE(o command) func(*cobra.Command, []string) error {
	return ran(func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			if !errors.Is(err, errUsage) {
				err = classify(errUsage, err)
			}
			return err
		}
		return o.Run(cmd.Context())
	})
}

// ran marks the errors of a cobra RunE as coming from the command itself.
func ran(f func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := f(cmd, args); err != nil {
			return classify(errRan, err)
		}
		return nil
	}
}

// exactArgs is cobra.ExactArgs with a usage error naming the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError("%s takes %d argument(s): %s (got %d)", cmd.CommandPath(), len(names), strings.Join(names, " "), len(args))
		}
		return nil
	}
}

// withTimeout bounds one command's etcd requests by --command-timeout. Its
// expiry reads as "etcd unreachable".
func (g *globalOptions) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, g.CommandTimeout, classify(errUnreachable,
		fmt.Errorf("etcd at %s did not answer within --command-timeout %v", strings.Join(g.Endpoints, ","), g.CommandTimeout)))
}

// timeoutErr replaces a bare deadline error with ctx's cause, which says
// which deadline fired.
func timeoutErr(ctx context.Context, err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		if cause := context.Cause(ctx); cause != nil && cause != context.DeadlineExceeded {
			return cause
		}
	}
	return err
}

// do connects, runs f with a context bounded by --command-timeout, and
// closes the connection.
func (g *globalOptions) do(ctx context.Context, f func(context.Context, *coordinator.Coordinator) error) error {
	ctx, cancel := g.withTimeout(ctx)
	defer cancel()
	c, done, err := g.connect(ctx)
	if err != nil {
		return timeoutErr(ctx, err)
	}
	defer done()
	return timeoutErr(ctx, f(ctx, c))
}
