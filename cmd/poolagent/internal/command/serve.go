package command

import (
	"context"
	"fmt"
	"net"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/agent"
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
them registered, re-registering after a lost lease. On SIGTERM it marks them
draining, waits up to the drain timeout for held seats to be released, then
deregisters them and exits 0. It serves /metrics, /healthz and /readyz.`,
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
	cfg, err := loadConfig(o.ConfigPath, config.ModeServe, o.streams, o.flags)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, o.streams.Err)
	cli, err := agent.NewClient(cfg.Etcd)
	if err != nil {
		return err
	}
	defer func() {
		cli.Close()
		log.Debug("etcd client closed")
	}()
	ln, err := net.Listen("tcp", cfg.Agent.Listen)
	if err != nil {
		return fmt.Errorf("listen on agent.listen %s: %w", cfg.Agent.Listen, err)
	}
	log.Info("agent starting", "endpoints", cfg.Etcd.Endpoints, "listen", ln.Addr().String(), "instances", len(cfg.Agent.Instances))
	return agentRun{cli: cli, cfg: cfg, log: log, ln: ln, pools: agentPools(cfg.Agent)}.run(ctx)
}
