package command

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/config"
)

// ServeOptions are the inputs of `poolagent serve`.
type ServeOptions struct {
	// ConfigPath is the YAML file; default $ETCDPOOL_CONFIG.
	ConfigPath string
	streams    Streams
	flags      *pflag.FlagSet
}

// NewServeCommand returns `poolagent serve`.
func NewServeCommand(s Streams) *cobra.Command {
	o := &ServeOptions{streams: s}
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Register this host's instances and keep them registered",
		Long: `serve registers the instances listed in the config file under one lease and keeps
them registered: after a lost lease it registers them under a new one, and an
instance deleted by someone else while the lease lives is registered again. On
SIGTERM it marks them draining, waits up to the drain timeout for held seats to
be released, then deregisters them and exits 0. It serves /metrics, /healthz
and /readyz.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	o.flags = cmd.Flags()
	o.flags.StringVar(&o.ConfigPath, "config", "", "YAML config file (env "+config.EnvName("config")+")")
	config.BindFlags(o.flags, config.ModeServe)
	return cmd
}

// Run loads and validates the configuration, then runs the agent until
// ctx ends and its instances are drained.
func (o *ServeOptions) Run(ctx context.Context) error {
	p, err := openProcess(o.ConfigPath, config.ModeServe, o.streams, o.flags)
	if err != nil {
		return err
	}
	defer p.close()
	p.log.Info("agent starting", "endpoints", p.cfg.Etcd.Endpoints, "listen", p.ln.Addr().String(), "instances", len(p.cfg.Agent.Instances))
	return agentRun{cli: p.cli, cfg: p.cfg, log: p.log, ln: p.ln, pools: agentPools(p.cfg.Agent)}.run(ctx)
}
