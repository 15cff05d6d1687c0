package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestEndpoints(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // joined result, or "error: <substring>"
	}{
		{"host:port", Config{Endpoints: []string{"127.0.0.1:2379"}}, "http://127.0.0.1:2379"},
		{"host:port with TLS", Config{Endpoints: []string{"h:2379"}, CAFile: "ca.pem"}, "https://h:2379"},
		{"mixed schemes: https turns TLS on", Config{Endpoints: []string{"HTTPS://h:1", "Http://g:2"}}, "error: plain http://"},
		{"upper-case scheme", Config{Endpoints: []string{"HTTP://h:1"}}, "http://h:1"},
		{"upper-case http with TLS", Config{Endpoints: []string{"HTTP://h:2379"}, CAFile: "ca.pem"}, "error: plain http://"},
		{"http with server name", Config{Endpoints: []string{"http://h:2379"}, ServerName: "x"}, "error: plain http://"},
		{"https implies TLS", Config{Endpoints: []string{"https://h:1", "g:2"}}, "https://h:1,https://g:2"},
		{"other scheme", Config{Endpoints: []string{"unix://x:1"}}, "error: want host:port"},
		{"no port", Config{Endpoints: []string{"http://h"}}, "error: not host:port"},
		{"empty", Config{Endpoints: []string{" "}}, "error: empty endpoint"},
		{"none", Config{}, "error: at least one"},
		{"long", Config{Endpoints: []string{strings.Repeat("h", 10000) + ":1:2"}}, "error: bytes) is not host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eps, err := tt.cfg.endpoints()
			got := strings.Join(eps, ",")
			if err != nil {
				got = "error: " + err.Error()
				if !errors.Is(err, ErrInvalid) || len(got) > 200 {
					t.Errorf("err %q: not ErrInvalid, or too long", err)
				}
			}
			if want, isErr := strings.CutPrefix(tt.want, "error: "); (err != nil) != isErr || !strings.Contains(got, want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCredentials(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("fromfile\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	check := func(name, userFlag, pwFile, wantUser, wantPass string) {
		t.Helper()
		u, p, err := Credentials(userFlag, pwFile, getenv)
		if err != nil || u != wantUser || p != wantPass {
			t.Errorf("%s: got %q %q %v, want %q %q", name, u, p, err, wantUser, wantPass)
		}
	}
	check("inline", "root:pw", "", "root", "pw")
	check("inline with colon", "root:a:b", "", "root", "a:b")
	check("file", "root", file, "root", "fromfile")
	check("none", "root", "", "root", "")
	env[EnvPassword] = "fromenv"
	check("env", "root", "", "root", "fromenv")
	env[EnvPasswordFile] = file
	check("env file wins", "root", "", "root", "fromfile")

	_, _, err := Credentials(":s3cretXYZ", "", getenv)
	if err == nil || strings.Contains(err.Error(), "s3cretXYZ") || !errors.Is(err, ErrInvalid) {
		t.Errorf("':secret' gives %v: want an error that does not echo the secret", err)
	}
	_, _, err = Credentials("root", filepath.Join(t.TempDir(), "missing"), getenv)
	if err == nil || !errors.Is(err, ErrInvalid) {
		t.Errorf("missing file: %v", err)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want Class
	}{
		{nil, None},
		{rpctypes.ErrPermissionDenied, Permanent},
		{fmt.Errorf("claim: %w", rpctypes.ErrPermissionDenied), Permanent},
		{rpctypes.ErrAuthFailed, Permanent},
		{rpctypes.ErrRequestTooLarge, Permanent},
		{rpctypes.ErrTooManyOps, Permanent},
		{rpctypes.ErrGRPCPermissionDenied, Permanent},
		{status.Error(codes.InvalidArgument, "bad"), Permanent},
		{status.Error(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority\""), Permanent},
		{rpctypes.ErrTimeout, Ambiguous},
		{rpctypes.ErrTimeoutDueToConnectionLost, Ambiguous},
		{context.DeadlineExceeded, Ambiguous},
		{status.Error(codes.DeadlineExceeded, "x"), Ambiguous},
		{rpctypes.ErrNoLeader, Transient},
		{status.Error(codes.Unavailable, "connection refused"), Transient},
		{errors.New("something else"), Transient},
		// A watch etcd cancelled: clientv3 passes the status's text as a
		// plain error (etcdclient.cancelled).
		{errors.New(rpctypes.ErrGRPCPermissionDenied.Error()), Permanent},
		{fmt.Errorf("follow pool: %w", errors.New(rpctypes.ErrGRPCPermissionDenied.Error())), Permanent},
		{errors.New(rpctypes.ErrGRPCNoLeader.Error()), Transient},
		{errors.New("rpc error: code = PermissionDenied desc = not an etcd error"), Transient},
		// A real status is classified by its code, not by its text.
		{rpctypes.ErrGRPCKeyNotFound, Permanent},
		{fmt.Errorf("get: %w", rpctypes.ErrGRPCKeyNotFound), Permanent},
	}
	for _, tt := range tests {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if !Denied(rpctypes.ErrPermissionDenied) || !Denied(rpctypes.ErrAuthFailed) || Denied(rpctypes.ErrTooManyOps) {
		t.Error("Denied misclassifies")
	}
	e := Op("read", "/etcdpool/pools/gpu/", rpctypes.ErrPermissionDenied)
	if e.Error() != "etcd refused read of /etcdpool/pools/gpu/: permission denied" || !Denied(e) {
		t.Errorf("Op error = %q", e)
	}
}
