package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/etcdpool/etcdpool/internal/httpapi"
)

func TestValidateAPI(t *testing.T) {
	tok := httpapi.Principal{Name: "court", TokenSHA256: httpapi.HashToken("t"), Pools: []string{"*"}, Operations: []httpapi.Operation{httpapi.OpClaim}}
	tlsFiles := APITLS{CertFile: "c.pem", KeyFile: "k.pem"}
	cases := []struct {
		name  string
		api   API
		field string // "" for valid
		msg   string
	}{
		{"no api", API{}, "", ""},
		{"dev default: loopback, anonymous", API{Listen: DefaultDevAPIListen}, "", ""},
		{"localhost", API{Listen: "localhost:8480"}, "", ""},
		{"ipv6 loopback", API{Listen: "[::1]:8480"}, "", ""},
		{"principals without listen", API{Principals: []httpapi.Principal{tok}}, "api.listen", "must be set"},
		{"all interfaces, plain HTTP", API{Listen: ":8480", Principals: []httpapi.Principal{tok}}, "api.listen", "not a loopback address"},
		{"public address, plain HTTP", API{Listen: "10.0.0.1:8480", Principals: []httpapi.Principal{tok}}, "api.listen", "set api.tls.certFile"},
		{"TLS without principals", API{Listen: ":8480", TLS: tlsFiles}, "api.principals", "anonymous access is for loopback only"},
		{"TLS with principals", API{Listen: ":8480", TLS: tlsFiles, Principals: []httpapi.Principal{tok}}, "", ""},
		{"cert without key", API{Listen: ":8480", TLS: APITLS{CertFile: "c.pem"}}, "api.tls.keyFile", "go together"},
		{"client CA without TLS", API{Listen: "127.0.0.1:1", TLS: APITLS{ClientCAFile: "ca.pem"}}, "api.tls.clientCAFile", "need TLS"},
		{"bad port", API{Listen: "127.0.0.1:x"}, "api.listen", "bad port"},
		{"bad principal", API{Listen: "127.0.0.1:1", Principals: []httpapi.Principal{{Name: "a"}}}, "api.principals[0].tokenSHA256", "no way to authenticate"},
		{"negative max wait", API{Listen: "127.0.0.1:1", MaxWait: -1}, "api.maxWait", "negative"},
	}
	for _, c := range cases {
		cfg := Default()
		cfg.API = c.api
		err := cfg.Validate()
		var fe *FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v, want valid", c.name, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Msg, c.msg)):
			t.Errorf("%s: %v, want a field error on %s saying %q", c.name, err, c.field, c.msg)
		}
	}
}
