package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/termsafe"
)

// Validate checks the fields and cross-field rules shared by every mode,
// and the agent and sidecar sections as far as they are filled in. Use
// ValidateServe or ValidateSidecar to also require what a mode needs.
//
// Errors are FieldErrors. One about a value that a flag or variable set
// names that flag or variable; one about a value from the file carries the
// file and line.
func (c Config) Validate() error {
	for _, check := range []func() error{c.validateEtcd, c.validateCommon, c.validateAgent, c.validateSidecar, c.validateAPI} {
		if err := check(); err != nil {
			return c.locate(err)
		}
	}
	return nil
}

// ValidateServe is Validate plus the rules of `poolagent serve`: at least
// one instance.
func (c Config) ValidateServe() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if len(c.Agent.Instances) == 0 {
		return c.locate(fieldErr("agent.instances", "list at least one instance to register"))
	}
	return nil
}

// ValidateSidecar is Validate plus the rules of `poolagent sidecar`: a pool
// to claim from.
func (c Config) ValidateSidecar() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Sidecar.Pool == "" {
		return c.locate(fieldErr("sidecar.pool", "must not be empty: name the pool to claim a seat of"))
	}
	return nil
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// validateEtcd checks the connection settings with etcdclient, the rules
// poolctl applies too, and names the field (and the variable or flag it
// came from).
func (c Config) validateEtcd() error {
	e := c.Etcd
	if e.Username != "" && e.Password == "" {
		return fieldErr("etcd.password", "user %q has no password: set etcd.passwordFile, %s or %s",
			e.Username, etcdclient.EnvPasswordFile, etcdclient.EnvPassword)
	}
	err := e.Client().Validate()
	var fe *etcdclient.FieldError
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	path := map[string]string{"endpoints": "etcd.endpoints", "dial-timeout": "etcd.dialTimeout",
		"cert": "etcd.tls.keyFile", "user": "etcd.username", "cacert": "etcd.tls.caFile"}[fe.Field]
	if path == "" {
		path = "etcd." + fe.Field
	}
	return fieldErr(path, "%s", fe.Msg)
}

// checkHostPort accepts host:port with a numeric port; the host may be
// empty (all interfaces) unless needHost.
func checkHostPort(addr string, needHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	if needHost && host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q has a bad host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has a bad port %q", addr, port)
	}
	return nil
}

func (c Config) validateCommon() error {
	if err := coordinator.ValidatePrefix(c.Prefix); err != nil {
		return &FieldError{Field: "prefix", Err: err}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fieldErr("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return fieldErr("log.format", "%q is not text or json", c.Log.Format)
	}
	return nil
}

// checkTTL applies etcd's lease bounds and the rule that one request must
// fit in a TTL: a keepalive or re-registration that can take longer than
// the lease lasts cannot save it.
func (c Config) checkTTL(field string, ttl Duration) error {
	if ttl.D() < coordinator.MinTTL || ttl.D() > coordinator.MaxTTL {
		return fieldErr(field, "%v is outside %v..%v (etcd's minimum lease TTL is %v)",
			ttl, coordinator.MinTTL, coordinator.MaxTTL, coordinator.MinTTL)
	}
	if c.Etcd.DialTimeout > ttl {
		return fieldErr(field, "%v is shorter than etcd.dialTimeout %v; lower the timeout so a request fits in one lease", ttl, c.Etcd.DialTimeout)
	}
	return nil
}

// checkName checks a pool, instance or tenant name with
// coordinator.ValidateName.
func checkName(field, n string) error {
	if err := coordinator.ValidateName(n); err != nil {
		return &FieldError{Field: field, Err: err}
	}
	return nil
}

// checkLabels applies coordinator's rule for instance label keys, so that a
// bad key is refused at start rather than at registration. It repeats the
// rule because coordinator does not export its instance check. Keys and
// values are refused with control or bidirectional override characters
// too (termsafe), as the holder is: operators read them.
func checkLabels(field string, labels map[string]string) error {
	for k, v := range labels {
		if k == "" || len(k) > coordinator.MaxNameLen {
			return fieldErr(field, "bad label key %q", k)
		}
		if err := errors.Join(termsafe.Check(k), termsafe.Check(v)); err != nil {
			return fieldErr(field, "label %q=%q: %v", k, v, err)
		}
	}
	return nil
}

func checkNonNegative(field string, d Duration) error {
	if d < 0 {
		return fieldErr(field, "must not be negative, got %v", d)
	}
	return nil
}
