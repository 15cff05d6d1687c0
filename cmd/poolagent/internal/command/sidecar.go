package command

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
)

// SidecarOptions are the inputs of `poolagent sidecar`.
type SidecarOptions struct {
	// ConfigPath is the YAML file; default $ETCDPOOL_CONFIG, else none.
	ConfigPath string
	streams    Streams
	flags      *pflag.FlagSet
}

// NewSidecarCommand returns `poolagent sidecar`.
func NewSidecarCommand(s Streams) *cobra.Command {
	o := &SidecarOptions{streams: s}
	cmd := &cobra.Command{
		Use:   "sidecar --pool POOL",
		Short: "Hold one seat of a pool for this pod",
		Long: `sidecar claims one seat of a pool, waiting for it if needed, writes the claim to
the seat file (JSON and env form) and answers /startupz and /readyz only while
the seat is held. On SIGTERM it releases the seat and exits 0. If the seat is
lost it rewrites the file, fails its probes and exits 3 after the loss grace.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context()) },
	}
	o.flags = cmd.Flags()
	o.flags.StringVar(&o.ConfigPath, "config", "", "YAML config file (env "+config.EnvName("config")+")")
	config.BindFlags(o.flags, config.ModeSidecar)
	return cmd
}

// Run loads and validates the configuration, then holds a seat until ctx
// ends or the seat is lost.
func (o *SidecarOptions) Run(ctx context.Context) error {
	cfg, err := loadConfig(o.ConfigPath, config.ModeSidecar, o.streams, o.flags)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, o.streams.Err)
	cli, err := agent.NewClient(cfg.Etcd)
	if err != nil {
		return err
	}
	defer cli.Close()
	ln, err := net.Listen("tcp", cfg.Sidecar.Listen)
	if err != nil {
		return fmt.Errorf("listen on sidecar.listen %s: %w", cfg.Sidecar.Listen, err)
	}
	reg, m := newRegistry()
	co, err := coordinator.New(cli, coordinator.WithPrefix(cfg.Prefix), coordinator.WithLogger(log), coordinator.WithMetrics(m))
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	defer co.Close()
	sc := agent.NewSidecar(co, cfg.Sidecar, agent.WithLogger(log), agent.WithRequestTimeout(cfg.Etcd.DialTimeout.D()),
		agent.WithLeaseLostHook(m.KeepaliveFailure))

	hctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- agent.ServeHTTP(hctx, ln, sc.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	}()
	log.Info("sidecar starting", "pool", cfg.Sidecar.Pool, "listen", ln.Addr().String(), "seatFile", cfg.Sidecar.SeatFile)
	err = sc.Run(ctx)
	stop()
	if herr := <-served; err == nil {
		err = herr
	}
	return err
}
