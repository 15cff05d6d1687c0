package agent

import (
	"log/slog"
	"time"
)

// Option configures an Agent or a Sidecar.
type Option func(*options)

type options struct {
	log            *slog.Logger  // default: discard
	requestTimeout time.Duration // default 2s
	pollInterval   time.Duration // default 200ms
	onLeaseLost    func()        // default: none
}

func buildOptions(opts []Option) options {
	o := options{
		log:            slog.New(slog.DiscardHandler),
		requestTimeout: 2 * time.Second,
		pollInterval:   200 * time.Millisecond,
		onLeaseLost:    func() {},
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRequestTimeout bounds each etcd request the agent or sidecar makes on
// its own (grant, register, release, health checks). Default 2s.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) { o.requestTimeout = d }
}

// WithPollInterval sets how often a draining agent checks for held seats.
// Default 200ms.
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollInterval = d } }

// WithLeaseLostHook is called each time a session's lease is lost, for
// example to count keepalive failures. Default: none.
func WithLeaseLostHook(f func()) Option { return func(o *options) { o.onLeaseLost = f } }
