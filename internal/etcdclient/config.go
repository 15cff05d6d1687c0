package etcdclient

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is the endpoint used when none is given. It carries no
// scheme, so it works with and without TLS.
const DefaultEndpoint = "127.0.0.1:2379"

// DefaultDialTimeout is the default bound on connecting.
const DefaultDialTimeout = 2 * time.Second

// ErrInvalid is wrapped by every error of Validate and of the credential
// and endpoint parsers.
var ErrInvalid = errors.New("etcdclient: invalid")

// Config says how to reach etcd. Both binaries fill it, from flags,
// environment variables or a config file, and pass it to ClientConfig.
type Config struct {
	// Endpoints are host:port, http://host:port or https://host:port (the
	// scheme in any case). Default [DefaultEndpoint].
	Endpoints []string
	// DialTimeout bounds connecting. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// Username for etcd authentication. Default none.
	Username string
	// Password for Username. Default none.
	Password string
	// CAFile is the CA bundle that verifies the servers. Default: the
	// system pool (when TLS is on).
	CAFile string
	// CertFile is the client certificate; needs KeyFile. Default none.
	CertFile string
	// KeyFile is the client key; needs CertFile. Default none.
	KeyFile string
	// ServerName is the name checked in the server certificate instead of
	// the endpoint's host. Default: the endpoint's host.
	ServerName string
}

// FieldError is an invalid value; Field names the flag, variable or
// config field it came from as the caller names it.
type FieldError struct {
	// Field is what the value came from, e.g. "endpoints".
	Field string
	// Msg says what is wrong. It never contains a password.
	Msg string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// TLS reports whether any TLS setting is present, or an endpoint says
// https://. With TLS, every endpoint is dialled with TLS.
func (c Config) TLS() bool {
	if c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" {
		return true
	}
	for _, ep := range c.Endpoints {
		if s, _, ok := splitScheme(ep); ok && s == "https" {
			return true
		}
	}
	return false
}

// Validate checks the endpoints (TLS can never be dropped: a plain
// http:// endpoint with TLS settings is refused, whatever its case), the
// timeout, and that certificate and key, and username and password, come
// together.
func (c Config) Validate() error {
	if _, err := c.endpoints(); err != nil {
		return err
	}
	if c.DialTimeout <= 0 {
		return &FieldError{"dial-timeout", fmt.Sprintf("must be positive, got %v", c.DialTimeout)}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return &FieldError{"cert", "--cert and --key go together"}
	}
	if c.Username == "" && c.Password != "" {
		return &FieldError{"user", "a password without a user name"}
	}
	return nil
}

// endpoints returns the endpoints as clientv3 wants them: a lower-case
// scheme, https:// whenever TLS is on.
func (c Config) endpoints() ([]string, error) {
	if len(c.Endpoints) == 0 {
		return nil, &FieldError{"endpoints", "at least one endpoint is required"}
	}
	tls := c.TLS()
	out := make([]string, 0, len(c.Endpoints))
	for _, ep := range c.Endpoints {
		n, err := normalize(strings.TrimSpace(ep), tls)
		if err != nil {
			return nil, &FieldError{"endpoints", err.Error()}
		}
		out = append(out, n)
	}
	return out, nil
}

// normalize turns one endpoint into scheme://host:port.
func normalize(ep string, tls bool) (string, error) {
	scheme, hostport, ok := splitScheme(ep)
	switch {
	case ep == "":
		return "", errors.New("empty endpoint")
	case !ok && strings.Contains(ep, "://"):
		return "", fmt.Errorf("%s: want host:port, http:// or https://", Truncate(ep))
	case ok && scheme == "http" && tls:
		return "", fmt.Errorf("%s is plain http:// but TLS is configured; use https://host:port or host:port", Truncate(ep))
	case !ok && tls:
		scheme = "https"
	case !ok:
		scheme = "http"
	}
	if err := checkHostPort(hostport); err != nil {
		return "", err
	}
	return scheme + "://" + hostport, nil
}

// splitScheme splits "HTTPS://h:p" into "https" and "h:p". ok is false
// when ep has no http or https scheme.
func splitScheme(ep string) (scheme, rest string, ok bool) {
	s, rest, found := strings.Cut(ep, "://")
	if !found {
		return "", ep, false
	}
	s = strings.ToLower(s)
	if s != "http" && s != "https" {
		return "", ep, false
	}
	return s, strings.TrimSuffix(rest, "/"), true
}

func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil || host == "" || strings.ContainsAny(host, " /") {
		return fmt.Errorf("%s is not host:port", Truncate(hp))
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("%s has a bad port", Truncate(hp))
	}
	return nil
}

// Truncate shortens s for an error message to at most 64 bytes plus a
// count of what was cut, so that a hostile 10,000-character value is not
// echoed whole.
func Truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:max], len(s))
}
