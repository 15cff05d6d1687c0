package config

import (
	"errors"
	"net"
	"strings"

	"github.com/etcdpool/etcdpool/internal/httpapi"
)

// DefaultDevAPIListen is where `poolagent dev` serves the HTTP API.
const DefaultDevAPIListen = "127.0.0.1:8480"

// API configures the HTTP/JSON API (internal/httpapi) that `poolagent
// serve` runs when Listen is set.
type API struct {
	// Listen is host:port of the API. Default none: no API. Plain HTTP
	// (no TLS) is allowed only on a loopback address.
	Listen string `json:"listen"`
	// TLS is the server certificate and, optionally, the CA of client
	// certificates. Required unless Listen is a loopback address.
	TLS APITLS `json:"tls"`
	// Principals are who may use the API, and for what
	// (httpapi.Principal). Required unless Listen is a loopback address;
	// with none, every request on loopback acts as httpapi.Anonymous,
	// which may do everything.
	Principals []httpapi.Principal `json:"principals"`
	// MaxWait bounds how long a claim may wait for a seat. Default 5m.
	MaxWait Duration `json:"maxWait"`
}

// APITLS is the API's server TLS material, as file paths.
type APITLS struct {
	// CertFile is the server certificate. Default none; needs KeyFile.
	CertFile string `json:"certFile"`
	// KeyFile is the server key. Default none; needs CertFile.
	KeyFile string `json:"keyFile"`
	// ClientCAFile, when set, verifies client certificates against it; a
	// verified certificate's subject CN or DNS SAN names a principal
	// (certName). Default none: bearer tokens only.
	ClientCAFile string `json:"clientCAFile"`
}

// Enabled reports whether the API serves TLS.
func (t APITLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Loopback reports whether Listen is a loopback address (127.0.0.0/8,
// ::1 or localhost).
func (a API) Loopback() bool {
	host, _, err := net.SplitHostPort(a.Listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Anonymous reports whether the API serves requests without credentials:
// when it lists no principals (Validate allows that only on loopback).
func (a API) Anonymous() bool { return len(a.Principals) == 0 }

// validateAPI checks the api section: its address, that plain HTTP and
// anonymous access stay on loopback, the TLS files and the principals.
func (c Config) validateAPI() error {
	a := c.API
	if a.Listen == "" {
		if a.TLS.Enabled() || len(a.Principals) > 0 {
			return fieldErr("api.listen", "must be set when api.tls or api.principals are: it is where the API listens")
		}
		return nil
	}
	if err := checkHostPort(a.Listen, false); err != nil {
		return fieldErr("api.listen", "%v", err)
	}
	if (a.TLS.CertFile == "") != (a.TLS.KeyFile == "") {
		return fieldErr("api.tls.keyFile", "api.tls.certFile and api.tls.keyFile go together: set both or neither")
	}
	if a.TLS.ClientCAFile != "" && !a.TLS.Enabled() {
		return fieldErr("api.tls.clientCAFile", "client certificates need TLS: set api.tls.certFile and api.tls.keyFile")
	}
	if !a.Loopback() && !a.TLS.Enabled() {
		return fieldErr("api.listen", "%s is not a loopback address, and plain HTTP would send tokens and session handles in the clear: set api.tls.certFile and api.tls.keyFile, or listen on 127.0.0.1", a.Listen)
	}
	if !a.Loopback() && len(a.Principals) == 0 {
		return fieldErr("api.principals", "%s is not a loopback address: list the principals allowed to use the API (anonymous access is for loopback only)", a.Listen)
	}
	if err := checkNonNegative("api.maxWait", a.MaxWait); err != nil {
		return err
	}
	if err := httpapi.ValidatePrincipals(a.Principals); err != nil {
		var fe *httpapi.FieldError
		if errors.As(err, &fe) {
			return fieldErr("api.principals"+fe.Field, "%s", fe.Msg)
		}
		return fieldErr("api.principals", "%v", err)
	}
	return nil
}
