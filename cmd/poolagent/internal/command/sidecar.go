package command

import (
	"context"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
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
		Long: `sidecar claims one seat of a pool, waiting for it if needed (a session lost while
it waits is replaced and it queues again, within --wait-timeout), writes the
claim to the seat file (JSON and env form) and answers /startupz and /readyz
only while the seat is held. On SIGTERM (or SIGINT, or a SIGHUP not ignored at
start) it releases the seat and exits 0. If the
seat is lost it rewrites the file, fails its probes and exits 3 after the loss
grace. It keeps its lease, seat and token in <seat-file>.state (mode 0600): a
sidecar restarted after a crash takes the same seat back, under the same
token, if its lease is still alive; otherwise it revokes the old lease and
claims afresh.`,
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
	p, err := openProcess(o.ConfigPath, config.ModeSidecar, o.streams, o.flags)
	if err != nil {
		return err
	}
	defer p.close()
	reg, m := newRegistry()
	co, err := newCoordinator(p.cli, p.cfg, p.log, m)
	if err != nil {
		p.ln.Close()
		return err
	}
	defer co.Close()
	cfg := p.cfg.Sidecar
	sc := agent.NewSidecar(co, cfg, agentOptions(p.log, p.cfg.Etcd.DialTimeout.D(), m)...)
	stopHTTP := serveHTTP(p.ln, sc.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	p.log.Info("sidecar starting", "pool", cfg.Pool, "listen", p.ln.Addr().String(), "seatFile", cfg.SeatFile)
	err = sc.Run(ctx)
	if herr := stopHTTP(); err == nil {
		err = herr
	}
	return err
}
