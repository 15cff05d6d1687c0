package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default() does not validate: %v", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"ttl below etcd minimum", func(c *Config) { c.Agent.TTL = Duration(time.Second) }, "agent.ttl"},
		{"sidecar ttl below minimum", func(c *Config) { c.Sidecar.TTL = Duration(1500 * time.Millisecond) }, "sidecar.ttl"},
		{"dial timeout above ttl", func(c *Config) { c.Agent.TTL, c.Etcd.DialTimeout = Duration(2*time.Second), Duration(5*time.Second) }, "agent.ttl"},
		{"empty instance pool", func(c *Config) { c.Agent.Instances = []Instance{{ID: "i"}} }, "agent.instances[0].pool"},
		{"bad instance address", func(c *Config) { c.Agent.Instances = []Instance{{Pool: "p", ID: "i", Address: "no-port"}} }, "agent.instances[0].address"},
		{"bad instance port", func(c *Config) { c.Agent.Instances = []Instance{{Pool: "p", ID: "i", Address: "h:99999"}} }, "agent.instances[0].address"},
		{"duplicate instance", func(c *Config) { c.Agent.Instances = []Instance{{Pool: "p", ID: "i"}, {Pool: "p", ID: "i"}} }, "agent.instances[1].id"},
		{"two instances at one address", func(c *Config) {
			c.Agent.Instances = []Instance{{Pool: "p", ID: "i", Address: "h:1"}, {Pool: "q", ID: "i", Address: "h:1"}, {Pool: "p", ID: "j", Address: "h:1"}}
		}, "agent.instances[2].address"},
		{"slash in pool name", func(c *Config) { c.Sidecar.Pool = "a/b" }, "sidecar.pool"},
		{"endpoint with another scheme", func(c *Config) { c.Etcd.Endpoints = []string{"unix://127.0.0.1:2379"} }, "etcd.endpoints"},
		{"http endpoint with TLS", func(c *Config) { c.Etcd.Endpoints, c.Etcd.TLS.CAFile = []string{"HTTP://127.0.0.1:2379"}, "ca.pem" }, "etcd.endpoints"},
		{"http endpoint with server name", func(c *Config) { c.Etcd.Endpoints, c.Etcd.TLS.ServerName = []string{"http://127.0.0.1:2379"}, "etcd" }, "etcd.endpoints"},
		{"no endpoints", func(c *Config) { c.Etcd.Endpoints = nil }, "etcd.endpoints"},
		{"cert without key", func(c *Config) { c.Etcd.TLS.CertFile = "c.pem" }, "etcd.tls.keyFile"},
		{"user without password", func(c *Config) { c.Etcd.Username = "u" }, "etcd.password"},
		{"negative drain", func(c *Config) { c.Agent.DrainTimeout = -1 }, "agent.drainTimeout"},
		{"pool capacity 0", func(c *Config) { c.Agent.Pools = []Pool{{Name: "p"}} }, "agent.pools[0]"},
		{"pool seat ttl too short", func(c *Config) { c.Agent.Pools = []Pool{{Name: "p", Capacity: 1, SeatTTL: Duration(time.Second)}} }, "agent.pools[0]"},
		{"pool seat ttl not whole seconds", func(c *Config) {
			c.Agent.Pools = []Pool{{Name: "p", Capacity: 1, SeatTTL: Duration(2500 * time.Millisecond)}}
		}, "agent.pools[0].seatTTL"},
		{"loss grace above ttl", func(c *Config) { c.Sidecar.LossGrace = Duration(time.Minute) }, "sidecar.lossGrace"},
		{"app stop above half the ttl", func(c *Config) { c.Sidecar.AppStopWithin = Duration(5001 * time.Millisecond) }, "sidecar.appStopWithin"},
		{"negative app stop", func(c *Config) { c.Sidecar.AppStopWithin = -1 }, "sidecar.appStopWithin"},
		{"app stop above half the granted ttl", func(c *Config) { // etcd grants 2s
			c.Sidecar.TTL, c.Sidecar.AppStopWithin = Duration(2900*time.Millisecond), Duration(1450*time.Millisecond)
		}, "sidecar.appStopWithin"},
		{"bad listen", func(c *Config) { c.Sidecar.Listen = "8086" }, "sidecar.listen"},
		{"bad log level", func(c *Config) { c.Log.Level = "loud" }, "log.level"},
		{"bad prefix", func(c *Config) { c.Prefix = "etcdpool/" }, "prefix"},
		{"prefix over 256 bytes", func(c *Config) { c.Prefix = "/" + strings.Repeat("p", 256) }, "prefix"},
		{"space in tenant", func(c *Config) { c.Sidecar.Tenant = "a b" }, "sidecar.tenant"},
		{"escape in holder", func(c *Config) { c.Sidecar.Holder = "pod\x1b[2J" }, "sidecar.holder"},
		{"bidi override in a label value", func(c *Config) { c.Sidecar.Labels = map[string]string{"zone": "a\u202e"} }, "sidecar.labels"},
		{"DEL in a label key", func(c *Config) { c.Sidecar.Labels = map[string]string{"zo\x7fne": "a"} }, "sidecar.labels"},
		{"dot-dot pool", func(c *Config) { c.Sidecar.Pool = ".." }, "sidecar.pool"},
		{"long instance id", func(c *Config) { c.Agent.Instances = []Instance{{Pool: "p", ID: strings.Repeat("i", 129)}} }, "agent.instances[0].id"},
		{"escape in agent name", func(c *Config) { c.Agent.Name = "a\x1b[2J" }, "agent.name"},
		{"agent name over 256 bytes", func(c *Config) { c.Agent.Name = strings.Repeat("a", 257) }, "agent.name"},
		{"tab in an instance address", func(c *Config) { c.Agent.Instances = []Instance{{Pool: "p", ID: "i", Address: "h\t:1"}} }, "agent.instances[0].address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.edit(&c)
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want a FieldError on %s", err, tc.field)
			}
		})
	}
}

// TestNameAndPrefixMessages checks that names and the prefix are refused
// for the coordinator's reasons, under the field's name.
func TestNameAndPrefixMessages(t *testing.T) {
	c := Default()
	c.Sidecar.Pool = "a/b"
	want := `config: sidecar.pool: coordinator: invalid argument: name "a/b" has '/'; use printable ASCII without '/' or spaces`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v\nwant %s", err, want)
	}
	c = Default()
	c.Prefix = "/etcdpool/"
	want = `config: prefix: coordinator: invalid argument: prefix "/etcdpool/" must start with '/', not end with '/', and be at most 256 bytes`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v\nwant %s", err, want)
	}
}

func TestModeRules(t *testing.T) {
	c := Default()
	if err := c.ValidateSidecar(); err == nil || !strings.Contains(err.Error(), "sidecar.pool") {
		t.Errorf("ValidateSidecar without a pool = %v", err)
	}
	if err := c.ValidateServe(); err == nil || !strings.Contains(err.Error(), "agent.instances") {
		t.Errorf("ValidateServe without instances = %v", err)
	}
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadLayersFileEnvFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "etcd:\n  endpoints: [http://file:2379]\nsidecar:\n  pool: from-file\n  ttl: 4s\n  tenant: file-tenant\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs, ModeSidecar)
	if err := fs.Parse([]string{"--ttl", "6s", "--labels", "zone=a,gpu=h100"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, ModeSidecar, env(map[string]string{
		"ETCDPOOL_TTL": "5s", "ETCDPOOL_POOL": "from-env", "POD_NAME": "web-0", "POD_NAMESPACE": "prod",
	}), fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateSidecar(); err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"endpoint from file", cfg.Etcd.Endpoints[0], "http://file:2379"},
		{"tenant from file", cfg.Sidecar.Tenant, "file-tenant"},
		{"pool: env beats file", cfg.Sidecar.Pool, "from-env"},
		{"ttl: flag beats env and file", cfg.Sidecar.TTL.String(), "6s"},
		{"labels from flag", FormatLabels(cfg.Sidecar.Labels), "gpu=h100,zone=a"},
		{"holder from the downward API", cfg.Sidecar.Holder, "prod/web-0"},
		{"default kept", cfg.Sidecar.Listen, ":8086"},
		{"env file next to seat file", cfg.Sidecar.EnvPath(), "/var/run/etcdpool/seat.env"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, path string
		env        map[string]string
		want       string
	}{
		{"unknown field", write("u.yaml", "agent:\n  tll: 5s\n"), nil, "u.yaml:2: agent.tll: unknown field; agent takes drainTimeout, instances, listen, name, pools, ttl"},
		{"duplicate key", write("d.yaml", "prefix: /a\nprefix: /b\n"), nil, "d.yaml:2: prefix: set twice"},
		{"numeric duration", write("n.yaml", "agent:\n  ttl: 10\n"), nil, `n.yaml:2: agent.ttl: want a duration such as "10s", got "10" (int)`},
		{"string for a number", write("s.yaml", "agent:\n  pools:\n  - name: p\n    capacity: two\n"), nil, `s.yaml:4: agent.pools[0].capacity: want int, got "two" (str)`},
		{"list for a mapping", write("l.yaml", "sidecar: [a]\n"), nil, "l.yaml:1: sidecar: want a mapping of fields, got a list"},
		{"not yaml", write("y.yaml", "a: [\n"), nil, "y.yaml: not YAML: yaml: line"},
		{"missing file", filepath.Join(dir, "nope.yaml"), nil, "--config"},
		{"bad env duration", "", map[string]string{"ETCDPOOL_DIAL_TIMEOUT": "fast"}, "ETCDPOOL_DIAL_TIMEOUT"},
		{"bad env labels", "", map[string]string{"ETCDPOOL_LABELS": "novalue"}, "ETCDPOOL_LABELS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path, ModeSidecar, env(tc.env), pflag.NewFlagSet("t", pflag.ContinueOnError))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "json") {
				t.Fatalf("Load() = %v, want an ErrInvalid naming %q", err, tc.want)
			}
		})
	}
}

func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{"", "a=b", "a=b,c=d", "a=", "=b", ",,", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseLabels(s)
		if err != nil {
			return
		}
		again, err := ParseLabels(FormatLabels(m))
		if err != nil {
			t.Fatalf("FormatLabels(%v) does not parse: %v", m, err)
		}
		if FormatLabels(again) != FormatLabels(m) {
			t.Fatalf("round trip %q -> %v -> %v", s, m, again)
		}
	})
}

// TestConnectionSettings checks the connection settings poolctl shares:
// endpoints without a scheme, --user user:password, the password from a
// file or ETCDPOOL_PASSWORD (never a flag), and errors that name the
// variable a bad value came from.
func TestConnectionSettings(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(env map[string]string, args ...string) (Config, error) {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		BindFlags(fs, ModeServe)
		if err := fs.Parse(args); err != nil {
			return Config{}, err
		}
		cfg, err := Load("", ModeServe, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, fs)
		if err != nil {
			return cfg, err
		}
		return cfg, cfg.Validate()
	}
	cfg, err := load(map[string]string{"ETCDPOOL_ENDPOINTS": "127.0.0.1:2379", "ETCDPOOL_USER": "u", "ETCDPOOL_PASSWORD": "envpw"})
	if err != nil || cfg.Etcd.Username != "u" || cfg.Etcd.Password != "envpw" {
		t.Errorf("env: %+v %v", cfg.Etcd, err)
	}
	cfg, err = load(nil, "--user", "u:inline")
	if err != nil || cfg.Etcd.Password != "inline" {
		t.Errorf("--user u:inline: %+v %v", cfg.Etcd, err)
	}
	cfg, err = load(nil, "--user", "u", "--password-file", pwFile)
	if err != nil || cfg.Etcd.Password != "fromfile" {
		t.Errorf("--password-file: %+v %v", cfg.Etcd, err)
	}
	if _, err := load(nil, "--password", "x"); err == nil {
		t.Error("--password is accepted on argv")
	}
	_, err = load(nil, "--user", ":s3cretXYZ")
	if err == nil || strings.Contains(err.Error(), "s3cretXYZ") {
		t.Errorf("--user :secret: %v", err)
	}
	_, err = load(map[string]string{"ETCDPOOL_ENDPOINTS": "HTTP://h:1", "ETCDPOOL_CACERT": "ca.pem"})
	if err == nil || !strings.Contains(err.Error(), "ETCDPOOL_ENDPOINTS") || !strings.Contains(err.Error(), "plain http://") {
		t.Errorf("http with TLS from env: %v", err)
	}
}

// TestSidecarTakesRunSpellings: the sidecar accepts poolctl run's flag
// spellings, --label (repeatable) and --wait, for the same settings.
func TestSidecarTakesRunSpellings(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	BindFlags(fs, ModeSidecar)
	if err := fs.Parse([]string{"--pool", "p", "--label", "zone=a", "--label", "gpu=h100", "--wait", "90s"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("", ModeSidecar, env(nil), fs)
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatLabels(cfg.Sidecar.Labels); got != "gpu=h100,zone=a" {
		t.Errorf("labels %q, want gpu=h100,zone=a", got)
	}
	if got := cfg.Sidecar.WaitTimeout.String(); got != "1m30s" {
		t.Errorf("wait timeout %q, want 1m30s", got)
	}
}

// TestValidateLocates: an invalid value from the file is reported at its
// file and line; one from a flag or variable names the flag or variable,
// not the field it sets.
func TestValidateLocates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := "agent:\n  pools:\n  - name: p\n    capacity: 0\nsidecar:\n  pool: p\n  lossGrace: 1h\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want FieldError
	}{
		{"from the file", nil, nil, FieldError{Field: "sidecar.lossGrace", File: path, Line: 7}},
		{"from a flag", []string{"--loss-grace", "2h"}, nil, FieldError{Field: "--loss-grace"}},
		{"from a variable", nil, map[string]string{"ETCDPOOL_LOSS_GRACE": "3h"}, FieldError{Field: "ETCDPOOL_LOSS_GRACE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			BindFlags(fs, ModeSidecar)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path, ModeSidecar, env(tc.env), fs)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.validateSidecar() // the sidecar section alone: agent.pools[0] is bad too
			err = cfg.locate(err)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.want.Field || fe.File != tc.want.File || fe.Line != tc.want.Line {
				t.Fatalf("error = %v (%+v), want field %q at %q:%d", err, fe, tc.want.Field, tc.want.File, tc.want.Line)
			}
		})
	}
	cfg, err := Load(path, ModeServe, env(nil), pflag.NewFlagSet("t", pflag.ContinueOnError))
	if err != nil {
		t.Fatal(err)
	}
	want := "config: " + path + ":3: agent.pools[0]: coordinator: invalid argument: capacity 0 is outside 1..1000000"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v\nwant %s", err, want)
	}
}
