package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Defaults of the global flags.
const (
	defaultEndpoint       = etcdclient.DefaultEndpoint
	defaultDialTimeout    = etcdclient.DefaultDialTimeout
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
	ServerName     string
	User           string
	PasswordFile   string
	DialTimeout    time.Duration
	CommandTimeout time.Duration
	Output         string
	NoHeaders      bool

	fromEnv map[string]bool // flags set from their ETCDPOOL_* variable
}

// newRootCommand builds the poolctl command tree for one invocation.
func newRootCommand(env *Env, sigs *signalRouter) *cobra.Command {
	g := &globalOptions{env: env, sigs: sigs, fromEnv: map[string]bool{}}
	root := &cobra.Command{
		Use:   "poolctl",
		Short: "Operate etcdpool seat pools",
		Long: "poolctl manages etcdpool pools: create and resize them, inspect seats, instances\n" +
			"and queues, force-release seats, drain instances, stream events, and run a\n" +
			"command while holding a seat.\n\n" + exitCodeHelp(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: ran(func(cmd *cobra.Command, _ []string) error {
			if err := g.applyEnv(cmd.Flags()); err != nil {
				return err
			}
			return g.validate()
		}),
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
		newStatusCommand(g), newExplainCommand(g), newRolesCommand(g), newDoctorCommand(g), newCompletionCommand(), newVersionCommand(g),
	)

	root.AddCommand(newDescribeCommand(g))
	registerCompletions(root, g)
	return root
}

func (g *globalOptions) addFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringSliceVar(&g.Endpoints, "endpoints", []string{defaultEndpoint}, "etcd endpoints, comma-separated: host:port, http://host:port or https://host:port")
	f.StringVar(&g.Prefix, "prefix", coordinator.DefaultPrefix, "root prefix of etcdpool's keys")
	f.StringVar(&g.CACert, "cacert", "", "verify the etcd server with this CA bundle (PEM); turns TLS on")
	f.StringVar(&g.Cert, "cert", "", "client certificate (PEM) for TLS; needs --key")
	f.StringVar(&g.Key, "key", "", "client private key (PEM) for TLS; needs --cert")
	f.StringVar(&g.ServerName, "server-name", "", "name to verify in the server certificate instead of the endpoint's host; turns TLS on")
	f.StringVar(&g.User, "user", "", "etcd user, or user:password (visible in ps); the password otherwise comes from --password-file, ETCDPOOL_PASSWORD_FILE, ETCDPOOL_PASSWORD or a prompt")
	f.StringVar(&g.PasswordFile, "password-file", "", "file whose first line is the password of --user")
	f.DurationVar(&g.DialTimeout, "dial-timeout", defaultDialTimeout, "how long to wait for a connection to etcd")
	f.DurationVar(&g.CommandTimeout, "command-timeout", defaultCommandTimeout, "bound on each command's etcd requests (not on run's or watch's lifetime)")
	f.StringVarP(&g.Output, "output", "o", "table", "output format: table, wide (table with more columns), json or yaml")
	f.BoolVar(&g.NoHeaders, "no-headers", false, "omit table headers")
	for _, name := range envFlags {
		fl := f.Lookup(name)
		fl.Usage += " (env " + envName(name) + ")"
	}
}

// envFlags are the connection flags that an ETCDPOOL_* variable sets when
// the flag is absent; poolagent reads the same variables.
var envFlags = []string{"endpoints", "prefix", "cacert", "cert", "key", "server-name", "user", "password-file", "dial-timeout"}

// envName is the variable of a flag, as poolagent names it.
func envName(flag string) string { return etcdclient.EnvName(flag) }

// applyEnv sets each flag of envFlags that the command line left alone
// from its variable.
func (g *globalOptions) applyEnv(fs *pflag.FlagSet) error {
	for _, name := range envFlags {
		fl := fs.Lookup(name)
		v := g.env.Getenv(envName(name))
		if fl == nil || fl.Changed || v == "" {
			continue
		}
		if err := fl.Value.Set(v); err != nil {
			return usageError("%s: %v", envName(name), err)
		}
		g.fromEnv[name] = true
	}
	return nil
}

// validate checks the global flags before any command connects. The
// connection settings are checked by etcdclient, as in poolagent.
func (g *globalOptions) validate() error {
	switch g.Output {
	case "table", "wide", "json", "yaml":
	default:
		return usageError("--output %q: want table, wide, json or yaml", g.Output)
	}
	if err := checkPrefix(g.Prefix); err != nil {
		return err
	}
	if g.CommandTimeout <= 0 {
		return usageError("--command-timeout must be positive")
	}
	ec := etcdclient.Config{Endpoints: g.Endpoints, DialTimeout: g.DialTimeout,
		CAFile: g.CACert, CertFile: g.Cert, KeyFile: g.Key, ServerName: g.ServerName}
	if err := ec.Validate(); err != nil {
		return g.fieldErr(err)
	}
	if _, _, _, err := etcdclient.ParseUser(g.User); g.User != "" && err != nil {
		return g.fieldErr(err)
	}
	return nil
}

// fieldErr is an etcdclient.FieldError as bad usage, naming the flag or
// the variable the value came from.
func (g *globalOptions) fieldErr(err error) error {
	var fe *etcdclient.FieldError
	if !errors.As(err, &fe) {
		return usageError("%w", err)
	}
	name := "--" + fe.Field
	if g.fromEnv[fe.Field] {
		name = envName(fe.Field)
	}
	return usageError("%s: %s", name, fe.Msg)
}

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
