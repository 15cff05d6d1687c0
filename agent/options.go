package agent

import (
	"log/slog"
	"time"
)

// Option configures an Agent or a Sidecar.
type Option func(*options)

type options struct {
	log                *slog.Logger  // default: discard
	requestTimeout     time.Duration // default 2s
	pollInterval       time.Duration // default 200ms
	onSessionLost      func()        // default: none
	onKeepAliveFailure func(error)   // default: none
}

func buildOptions(opts []Option) options {
	o := options{
		log:                slog.New(slog.DiscardHandler),
		requestTimeout:     2 * time.Second,
		pollInterval:       200 * time.Millisecond,
		onSessionLost:      func() {},
		onKeepAliveFailure: func(error) {},
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

// WithSessionLostHook sets f, called each time a session is lost before it
// was closed: the lease expired, was revoked, or could not be kept alive
// until its local deadline. The agent and the sidecar then open a new
// session, unless the sidecar held a seat. Default: none.
func WithSessionLostHook(f func()) Option { return func(o *options) { o.onSessionLost = f } }

// WithKeepAliveFailureHook sets f, called after each keepalive attempt of
// any of the agent's or sidecar's sessions that fails (see
// coordinator.WithKeepAliveFailure): a session that dies of an etcd outage
// usually counts one or more failures first. f must not block. Default:
// none.
func WithKeepAliveFailureHook(f func(error)) Option {
	return func(o *options) { o.onKeepAliveFailure = f }
}
