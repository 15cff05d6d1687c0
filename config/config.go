package config

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("config: invalid")

// FieldError is a configuration error about one field. Callers match it
// with errors.As and read its fields; they never parse its message.
type FieldError struct {
	// Field is the dotted path of the field, e.g. "agent.instances[0].pool";
	// or, when a flag or variable set the value, that flag ("--ttl") or
	// variable ("ETCDPOOL_TTL"), since that is what the user typed.
	Field string
	// File and Line locate the value in the configuration file, when the
	// file set it; Line is 0 when unknown.
	File string
	Line int
	// Msg says what is wrong.
	Msg string
	// Err is the rule's own error, e.g. one wrapping
	// coordinator.ErrInvalid from PoolSpec.Validate; nil when Msg says all.
	Err error
}

// Error implements error: "config: FILE:LINE: FIELD: MSG: ERR", leaving
// out the parts that are empty.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		if e.Msg != "" {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) hold, and errors.Is on the
// rule's own error (Err) too.
func (e *FieldError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

// Defaults that other packages (probes, manifests) must agree with.
const (
	// DefaultEndpoint is the etcd endpoint used when none is configured;
	// without a scheme it works with and without TLS.
	DefaultEndpoint = etcdclient.DefaultEndpoint
	// DefaultPrefix is the root of etcdpool's keys.
	DefaultPrefix = coordinator.DefaultPrefix
	// DefaultAgentPort is the port of the agent's HTTP server.
	DefaultAgentPort = 9464
	// DefaultSidecarPort is the port of the sidecar's HTTP server, where
	// its probes are served.
	DefaultSidecarPort = 8086
	// DefaultSeatFile is where the sidecar writes its claim.
	DefaultSeatFile = "/var/run/etcdpool/seat.json"
)

// Config is the whole configuration file.
type Config struct {
	// Etcd says how to reach etcd.
	Etcd Etcd `json:"etcd"`
	// Prefix is the root of etcdpool's keys. Default DefaultPrefix.
	Prefix string `json:"prefix"`
	// Log configures logging to stderr.
	Log Log `json:"log"`
	// Agent configures `poolagent serve`.
	Agent Agent `json:"agent"`
	// Sidecar configures `poolagent sidecar`.
	Sidecar Sidecar `json:"sidecar"`
	// API configures the HTTP API of `poolagent serve` (config/api.go).
	API API `json:"api"`

	// origin maps a field's dotted path to the variable or flag that set
	// it last, so that an error names what the user typed.
	origin map[string]string
	// doc locates the fields the configuration file set; nil without one.
	doc *yamlDoc
}

// SetOrigin records that name, a flag or variable, set field (a dotted
// path such as "agent.ttl" or "agent.instances[0].seats"), so that an
// error about that field names it instead. For a command that fills a
// Config from flags of its own (poolagent dev).
func (c *Config) SetOrigin(field, name string) {
	if c.origin == nil {
		c.origin = map[string]string{}
	}
	c.origin[field] = name
}

// locate points err, when it is a FieldError about a field, at what set
// that field: the flag or variable (named instead of the field), or the
// file's line.
func (c Config) locate(err error) error {
	var fe *FieldError
	if !errors.As(err, &fe) {
		return err
	}
	if o := c.origin[fe.Field]; o != "" {
		fe.Field = o
		return err
	}
	c.doc.locate(err)
	return err
}

// Etcd is the client configuration.
type Etcd struct {
	// Endpoints are host:port, http://host:port or https://host:port, as
	// poolctl accepts them. Default [DefaultEndpoint].
	Endpoints []string `json:"endpoints"`
	// DialTimeout bounds connecting and each request the agent or sidecar
	// makes. Default 2s. It must not exceed the TTLs.
	DialTimeout Duration `json:"dialTimeout"`
	// Username for etcd authentication. Default none.
	Username string `json:"username"`
	// Password for Username. Default none. Prefer PasswordFile or
	// $ETCDPOOL_PASSWORD: a password in a file others can read leaks.
	Password string `json:"password"`
	// PasswordFile holds the password on its first line; read by Load
	// when Password is empty. Default none.
	PasswordFile string `json:"passwordFile"`
	// TLS configures client TLS. Default none (plain http).
	TLS TLS `json:"tls"`
}

// TLS is client TLS material, as file paths.
type TLS struct {
	// CertFile is the client certificate. Default none; needs KeyFile.
	CertFile string `json:"certFile"`
	// KeyFile is the client key. Default none; needs CertFile.
	KeyFile string `json:"keyFile"`
	// CAFile is the CA bundle that signs the servers. Default: system pool.
	CAFile string `json:"caFile"`
	// ServerName is the name checked in the server certificate instead
	// of the endpoint's host; it turns TLS on. Default: the endpoint's host.
	ServerName string `json:"serverName"`
}

// Client returns the connection settings as etcdclient takes them, the
// one struct both binaries build their etcd client from.
func (e Etcd) Client() etcdclient.Config {
	return etcdclient.Config{
		Endpoints: e.Endpoints, DialTimeout: e.DialTimeout.D(),
		Username: e.Username, Password: e.Password,
		CAFile: e.TLS.CAFile, CertFile: e.TLS.CertFile, KeyFile: e.TLS.KeyFile, ServerName: e.TLS.ServerName,
	}
}

// Enabled reports whether any TLS setting is present.
func (t TLS) Enabled() bool {
	return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" || t.ServerName != ""
}

// Log configures the slog handler.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `json:"level"`
	// Format is text or json. Default text.
	Format string `json:"format"`
}

// Agent configures the agent that registers instances.
type Agent struct {
	// Name is recorded on every instance. Default: the host name.
	Name string `json:"name"`
	// Listen is host:port of /metrics, /healthz and /readyz. Default ":9464".
	Listen string `json:"listen"`
	// TTL is the lease the instances are bound to. Default 10s; 2s..24h.
	TTL Duration `json:"ttl"`
	// DrainTimeout is how long SIGTERM waits for held seats on this
	// agent's instances to be released before deregistering. Default 30s;
	// 0 deregisters at once.
	DrainTimeout Duration `json:"drainTimeout"`
	// Pools are created when missing (never updated). Default none.
	Pools []Pool `json:"pools"`
	// Instances are registered under the agent's lease. Required for serve.
	Instances []Instance `json:"instances"`
}

// Pool is a pool the agent creates when it does not exist.
type Pool struct {
	// Name of the pool. Required.
	Name string `json:"name"`
	// Capacity is how many seats may be held at once. Required, >= 1.
	Capacity int `json:"capacity"`
	// SeatTTL is the session TTL claimants should use. Default 0: the
	// coordinator's default (10s).
	SeatTTL Duration `json:"seatTTL"`
	// TenantLimit caps the seats of one tenant. Default 0: no limit.
	TenantLimit int `json:"tenantLimit"`
	// RequireInstance makes every claim bind to an instance. Default false.
	RequireInstance bool `json:"requireInstance"`
}

// Spec returns the pool's spec as the coordinator stores it. A seat TTL
// that is not whole seconds is cut to whole seconds; Validate refuses it.
func (p Pool) Spec() coordinator.PoolSpec {
	return coordinator.PoolSpec{Capacity: p.Capacity, SeatTTLSeconds: int64(p.SeatTTL.D() / time.Second),
		TenantLimit: p.TenantLimit, RequireInstance: p.RequireInstance}
}

// Instance is a worker the agent registers.
type Instance struct {
	// Pool the instance serves. Required.
	Pool string `json:"pool"`
	// ID names the instance within its pool. Required.
	ID string `json:"id"`
	// Address is host:port where claimants reach the worker. Default none.
	Address string `json:"address"`
	// Labels are matched by claims that ask for labels. Default none.
	Labels map[string]string `json:"labels"`
	// Seats is how many claims it serves at once. Default 1.
	Seats int `json:"seats"`
}

// Sidecar configures the claimant.
type Sidecar struct {
	// Pool to claim a seat of. Required for sidecar.
	Pool string `json:"pool"`
	// Tenant the seat is charged to. Default none.
	Tenant string `json:"tenant"`
	// Instance binds the seat to this instance only. Default any.
	Instance string `json:"instance"`
	// Labels binds the seat to an instance with these labels. Default any.
	Labels map[string]string `json:"labels"`
	// Holder names the claimant. Default $POD_NAMESPACE/$POD_NAME when set,
	// else "<host>/<pid>".
	Holder string `json:"holder"`
	// WaitTimeout bounds the wait for a seat. Default 0: until stopped.
	WaitTimeout Duration `json:"waitTimeout"`
	// TTL is the claimant's lease. Default 10s; 2s..24h.
	TTL Duration `json:"ttl"`
	// Listen is host:port of the probes. Default ":8086".
	Listen string `json:"listen"`
	// SeatFile is where the claim is written as JSON. Default
	// DefaultSeatFile.
	SeatFile string `json:"seatFile"`
	// EnvFile is where the claim is written as KEY='value' lines. Default:
	// SeatFile with its extension replaced by ".env".
	EnvFile string `json:"envFile"`
	// LossGrace is how long the sidecar keeps serving failed probes after
	// losing its seat before it exits with code 3. Default 2s.
	LossGrace Duration `json:"lossGrace"`
	// AppStopWithin is how long the app may take to stop once the
	// sidecar's /readyz fails (with /readyz as its liveness probe: period
	// x failure threshold + timeout + the probe's grace). While it holds
	// the seat, /readyz fails as soon as the lease could end within that
	// long (no keepalive answered since lease end - AppStopWithin), so that
	// an app cut off from etcd is stopped before its seat can be granted
	// to anyone else. Default 0: /readyz fails only when the seat is lost,
	// at the session's local deadline, which leaves a partitioned app at
	// most the session's margin (TTL/10, at least 500 ms) to stop. At most
	// MaxAppStopWithin of the TTL etcd grants.
	AppStopWithin Duration `json:"appStopWithin"`
}

// MaxAppStopWithin is the longest Sidecar.AppStopWithin that a lease of
// ttl (as etcd granted it: whole seconds) allows. A keepalive is sent
// ttl/3 after the last one's answer, so just before its answer the lease's
// earliest end is 2/3 of ttl less two keepalive round trips away; ttl/2
// leaves ttl/6 for those round trips, so that keepalives answered that
// promptly never fail /readyz.
func MaxAppStopWithin(ttl time.Duration) time.Duration { return ttl / 2 }

// Default returns the configuration with every default filled in.
func Default() Config {
	return Config{
		Etcd:   Etcd{Endpoints: []string{DefaultEndpoint}, DialTimeout: Duration(2 * time.Second)},
		Prefix: DefaultPrefix,
		Log:    Log{Level: "info", Format: "text"},
		Agent: Agent{
			Listen:       ":" + strconv.Itoa(DefaultAgentPort),
			TTL:          Duration(10 * time.Second),
			DrainTimeout: Duration(30 * time.Second),
		},
		Sidecar: Sidecar{
			TTL:       Duration(10 * time.Second),
			Listen:    ":" + strconv.Itoa(DefaultSidecarPort),
			SeatFile:  DefaultSeatFile,
			LossGrace: Duration(2 * time.Second),
		},
	}
}

// EnvPath returns EnvFile, or SeatFile with its extension replaced by
// ".env" when EnvFile is empty.
func (s Sidecar) EnvPath() string {
	if s.EnvFile != "" {
		return s.EnvFile
	}
	return strings.TrimSuffix(s.SeatFile, filepath.Ext(s.SeatFile)) + ".env"
}
