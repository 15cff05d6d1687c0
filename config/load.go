package config

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// Mode selects the settings a command reads from the environment and flags.
type Mode int

// Modes.
const (
	// ModeServe is `poolagent serve`.
	ModeServe Mode = iota + 1
	// ModeSidecar is `poolagent sidecar`.
	ModeSidecar
)

// EnvPrefix starts every environment variable poolagent reads.
const EnvPrefix = "ETCDPOOL_"

// EnvName returns the environment variable that sets the same value as a
// flag: "dial-timeout" -> "ETCDPOOL_DIAL_TIMEOUT".
func EnvName(flag string) string { return etcdclient.EnvName(flag) }

// rawValue holds a flag's text until Load applies it, so that a bad value is
// reported like a bad file value, naming the flag. A labels flag may be
// repeated: its values add up (--labels a=1 --labels b=2 is a=1,b=2).
type rawValue struct {
	s, kind string
	set     bool
}

// String implements pflag.Value.
func (v *rawValue) String() string { return v.s }

// Set implements pflag.Value; the text is checked by Load.
func (v *rawValue) Set(s string) error {
	if v.kind == "labels" && v.set && s != "" {
		s = v.s + "," + s
	}
	v.s, v.set = s, true
	return nil
}

// Type implements pflag.Value.
func (v *rawValue) Type() string { return v.kind }

// BindFlags registers the flags of mode m on fs. Each flag's help names its
// environment variable and shows the default.
//
// The sidecar also takes poolctl run's spellings: --label (repeatable) for
// --labels and --wait for --wait-timeout.
func BindFlags(fs *pflag.FlagSet, m Mode) {
	if m == ModeSidecar {
		fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
			switch name {
			case "label":
				name = "labels"
			case "wait":
				name = "wait-timeout"
			}
			return pflag.NormalizedName(name)
		})
	}
	def := Default()
	for _, s := range settingsFor(m) {
		if s.envOnly {
			continue
		}
		usage := fmt.Sprintf("%s (env %s)", s.usage, EnvName(s.name))
		fs.Var(&rawValue{s: s.get(&def), kind: s.kind}, s.name, usage)
	}
}

// Load builds the configuration of mode m: Default(), then the YAML file at
// path (if path is not empty; decoded strictly), then the ETCDPOOL_*
// variables found by lookupEnv, then the flags of fs that were set. It does
// not validate. Every error wraps ErrInvalid and names the field, variable
// or flag at fault.
func Load(path string, m Mode, lookupEnv func(string) (string, bool), fs *pflag.FlagSet) (Config, error) {
	cfg := Default()
	if path != "" {
		doc, err := loadFile(path, &cfg)
		if err != nil {
			return Config{}, err
		}
		cfg.doc = doc
	}
	cfg.origin = map[string]string{}
	for _, s := range settingsFor(m) {
		if v, ok := lookupEnv(EnvName(s.name)); ok {
			if err := s.set(&cfg, v); err != nil {
				return Config{}, fieldErr(EnvName(s.name), "%v", err)
			}
			cfg.origin[s.field] = EnvName(s.name)
		}
	}
	for _, s := range settingsFor(m) {
		if f := fs.Lookup(s.name); f != nil && f.Changed && !s.envOnly {
			if err := s.set(&cfg, f.Value.String()); err != nil {
				return Config{}, fieldErr("--"+s.name, "%v", err)
			}
			cfg.origin[s.field] = "--" + s.name
		}
	}
	if err := cfg.readPasswordFile(lookupEnv); err != nil {
		return Config{}, err
	}
	if m == ModeSidecar && cfg.Sidecar.Holder == "" {
		cfg.Sidecar.Holder = podHolder(lookupEnv)
	}
	return cfg, nil
}

// loadFile decodes path over cfg and returns where each field stands in
// it. Fields absent from the file keep their defaults; unknown and
// repeated fields, and values of the wrong kind, are errors that name the
// file, line and field.
func loadFile(path string, cfg *Config) (*yamlDoc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &FieldError{Field: "--config", Err: err}
	}
	doc, err := parseYAML(path, b)
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(b, cfg); err != nil {
		// parseYAML checked the shape; this is a value it cannot judge.
		return nil, &FieldError{File: path, Msg: "cannot decode", Err: err}
	}
	return doc, nil
}

// podHolder is the Kubernetes downward-API identity, "namespace/name", or
// "" outside a pod.
func podHolder(lookupEnv func(string) (string, bool)) string {
	name, _ := lookupEnv("POD_NAME")
	ns, _ := lookupEnv("POD_NAMESPACE")
	switch {
	case name == "":
		return ""
	case ns == "":
		return name
	}
	return ns + "/" + name
}

// readPasswordFile fills etcd.password from etcd.passwordFile, or from
// $ETCDPOOL_PASSWORD_FILE, when no password is set.
func (c *Config) readPasswordFile(lookupEnv func(string) (string, bool)) error {
	path, field := c.Etcd.PasswordFile, "etcd.passwordFile"
	if o := c.origin[field]; o != "" {
		field = o
	}
	if path == "" {
		path, _ = lookupEnv(etcdclient.EnvPasswordFile)
		field = etcdclient.EnvPasswordFile
	}
	if c.Etcd.Password != "" || path == "" {
		return nil
	}
	pw, err := etcdclient.ReadPasswordFile(field, path)
	if err != nil {
		var fe *etcdclient.FieldError
		if errors.As(err, &fe) {
			return fieldErr(fe.Field, "%s", fe.Msg)
		}
		return err
	}
	c.Etcd.Password = pw
	return nil
}
