package config

import (
	"errors"
	"strings"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// setting is one value that an environment variable and a flag can set.
type setting struct {
	name    string // flag name; the variable is EnvName(name)
	kind    string // shown in help
	usage   string
	field   string // dotted path of the field it sets
	envOnly bool   // no flag: secrets never go on argv
	get     func(*Config) string
	set     func(*Config, string) error
}

func settingsFor(m Mode) []setting {
	out := commonSettings()
	switch m {
	case ModeServe:
		out = append(out, serveSettings()...)
	case ModeSidecar:
		out = append(out, sidecarSettings()...)
	}
	return out
}

func commonSettings() []setting {
	return []setting{
		at("etcd.endpoints", listSetting("endpoints", "etcd endpoints, comma-separated: host:port, http://host:port or https://host:port", func(c *Config) *[]string { return &c.Etcd.Endpoints })),
		at("etcd.dialTimeout", durSetting("dial-timeout", "bound on connecting and on each etcd request", func(c *Config) *Duration { return &c.Etcd.DialTimeout })),
		at("etcd.username", userSetting()),
		at("etcd.password", envOnly(strSetting("password", "etcd password", func(c *Config) *string { return &c.Etcd.Password }))),
		at("etcd.passwordFile", strSetting("password-file", "file whose first line is the password of --user", func(c *Config) *string { return &c.Etcd.PasswordFile })),
		at("etcd.tls.certFile", strSetting("cert", "TLS client certificate file; needs --key", func(c *Config) *string { return &c.Etcd.TLS.CertFile })),
		at("etcd.tls.keyFile", strSetting("key", "TLS client key file; needs --cert", func(c *Config) *string { return &c.Etcd.TLS.KeyFile })),
		at("etcd.tls.caFile", strSetting("cacert", "TLS CA bundle file; turns TLS on", func(c *Config) *string { return &c.Etcd.TLS.CAFile })),
		at("etcd.tls.serverName", strSetting("server-name", "name to verify in the server certificate instead of the endpoint's host; turns TLS on", func(c *Config) *string { return &c.Etcd.TLS.ServerName })),
		at("prefix", strSetting("prefix", "root of etcdpool's keys", func(c *Config) *string { return &c.Prefix })),
		at("log.level", strSetting("log-level", "debug, info, warn or error", func(c *Config) *string { return &c.Log.Level })),
		at("log.format", strSetting("log-format", "text or json", func(c *Config) *string { return &c.Log.Format })),
	}
}

func serveSettings() []setting {
	return []setting{
		at("agent.name", strSetting("name", "agent name recorded on instances (default: host name)", func(c *Config) *string { return &c.Agent.Name })),
		at("agent.listen", strSetting("listen", "host:port of /metrics, /healthz, /readyz", func(c *Config) *string { return &c.Agent.Listen })),
		at("agent.ttl", durSetting("ttl", "lease TTL of the instances (2s..24h)", func(c *Config) *Duration { return &c.Agent.TTL })),
		at("agent.drainTimeout", durSetting("drain-timeout", "on SIGTERM, longest wait for holders to release", func(c *Config) *Duration { return &c.Agent.DrainTimeout })),
	}
}

func sidecarSettings() []setting {
	return []setting{
		at("sidecar.pool", strSetting("pool", "pool to claim a seat of", func(c *Config) *string { return &c.Sidecar.Pool })),
		at("sidecar.tenant", strSetting("tenant", "tenant the seat is charged to", func(c *Config) *string { return &c.Sidecar.Tenant })),
		at("sidecar.instance", strSetting("instance", "bind the seat to this instance", func(c *Config) *string { return &c.Sidecar.Instance })),
		at("sidecar.labels", labelSetting("labels", "bind the seat to an instance with these labels, k=v,k2=v2", func(c *Config) *map[string]string { return &c.Sidecar.Labels })),
		at("sidecar.holder", strSetting("holder", "claimant identity (default: $POD_NAMESPACE/$POD_NAME, else host/pid)", func(c *Config) *string { return &c.Sidecar.Holder })),
		at("sidecar.waitTimeout", durSetting("wait-timeout", "bound on the wait for a seat; 0 waits until stopped", func(c *Config) *Duration { return &c.Sidecar.WaitTimeout })),
		at("sidecar.ttl", durSetting("ttl", "lease TTL of the claim (2s..24h)", func(c *Config) *Duration { return &c.Sidecar.TTL })),
		at("sidecar.listen", strSetting("listen", "host:port of /startupz, /readyz, /seat", func(c *Config) *string { return &c.Sidecar.Listen })),
		at("sidecar.seatFile", strSetting("seat-file", "JSON file the claim is written to", func(c *Config) *string { return &c.Sidecar.SeatFile })),
		at("sidecar.envFile", strSetting("env-file", "env file the claim is written to (default: the seat file with its extension replaced by .env: seat.json -> seat.env)", func(c *Config) *string { return &c.Sidecar.EnvFile })),
		at("sidecar.lossGrace", durSetting("loss-grace", "after losing the seat, time before exiting with code 3", func(c *Config) *Duration { return &c.Sidecar.LossGrace })),
		at("sidecar.appStopWithin", durSetting("app-stop-within", "how long the app takes to stop once /readyz fails; /readyz then fails that long before the lease could end without keepalives (0..ttl/2; 0: only once the seat is lost)", func(c *Config) *Duration { return &c.Sidecar.AppStopWithin })),
	}
}

// at records the field a setting sets.
func at(field string, s setting) setting { s.field = field; return s }

// envOnly makes a setting a variable without a flag.
func envOnly(s setting) setting { s.envOnly = true; return s }

// userSetting is --user: a user name, or user:password as poolctl takes
// it (the password then shows in ps).
func userSetting() setting {
	return setting{name: "user", kind: "string", usage: "etcd user, or user:password (visible in ps; prefer --password-file or ETCDPOOL_PASSWORD)",
		get: func(c *Config) string { return c.Etcd.Username },
		set: func(c *Config, v string) error {
			user, pass, inline, err := etcdclient.ParseUser(v)
			if err != nil {
				var fe *etcdclient.FieldError
				if errors.As(err, &fe) {
					return errors.New(fe.Msg)
				}
				return err
			}
			c.Etcd.Username = user
			if inline {
				c.Etcd.Password = pass
			}
			return nil
		}}
}

func strSetting(name, usage string, field func(*Config) *string) setting {
	return setting{name: name, kind: "string", usage: usage,
		get: func(c *Config) string { return *field(c) },
		set: func(c *Config, v string) error { *field(c) = v; return nil }}
}

func durSetting(name, usage string, field func(*Config) *Duration) setting {
	return setting{name: name, kind: "duration", usage: usage,
		get: func(c *Config) string { return field(c).String() },
		set: func(c *Config, v string) error {
			d, err := parseDuration(v)
			if err != nil {
				return err
			}
			*field(c) = d
			return nil
		}}
}

func listSetting(name, usage string, field func(*Config) *[]string) setting {
	return setting{name: name, kind: "urls", usage: usage,
		get: func(c *Config) string { return strings.Join(*field(c), ",") },
		set: func(c *Config, v string) error {
			var out []string
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
			*field(c) = out
			return nil
		}}
}

func labelSetting(name, usage string, field func(*Config) *map[string]string) setting {
	return setting{name: name, kind: "labels", usage: usage,
		get: func(c *Config) string { return FormatLabels(*field(c)) },
		set: func(c *Config, v string) error {
			m, err := ParseLabels(v)
			if err == nil {
				*field(c) = m
			}
			return err
		}}
}
