package etcdclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Class is what a caller may do after an etcd request failed.
type Class int

// Classes, from Classify.
const (
	// None is no error.
	None Class = iota
	// Transient errors may pass: etcd unavailable or without a leader
	// before the request was sent. Retry with backoff.
	Transient
	// Ambiguous errors leave the outcome unknown: a timeout or a lost
	// connection after the request was sent. Read back before retrying.
	Ambiguous
	// Permanent errors never pass by retrying: permission denied, auth
	// failed, invalid argument, request too large, too many operations in
	// a transaction, a TLS certificate the peer refuses. End the command.
	Permanent
)

// String names the class.
func (c Class) String() string {
	return [...]string{"none", "transient", "ambiguous", "permanent"}[c]
}

// Sentinels for the permanent errors callers map to exit codes or
// messages. Classify recognizes them wrapped in any error.
var (
	// ErrPermissionDenied is etcd RBAC refusing a request.
	ErrPermissionDenied = errors.New("etcdclient: permission denied")
	// ErrAuthFailed is a wrong user name or password, or auth required
	// and none given.
	ErrAuthFailed = errors.New("etcdclient: authentication failed")
	// ErrTLS is a TLS handshake that failed for a reason retrying cannot
	// fix (an unknown CA, an expired or mismatched certificate).
	ErrTLS = errors.New("etcdclient: TLS handshake failed")
	// ErrUnreachable is no connection within the dial timeout.
	ErrUnreachable = errors.New("etcdclient: etcd unreachable")
)

// permanentEtcd are the etcd errors that are Permanent. An invalid auth
// token among them: clientv3 fetches a new token and retries by itself
// when it has the user's password (its retry interceptor), so one that
// reaches us is a token it cannot renew (one the caller set, or a refused
// renewal), which retrying does not fix.
var permanentEtcd = []error{
	rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty,
	rpctypes.ErrAuthNotEnabled, rpctypes.ErrInvalidAuthToken, rpctypes.ErrInvalidAuthMgmt,
	rpctypes.ErrRequestTooLarge, rpctypes.ErrTooManyOps, rpctypes.ErrDuplicateKey,
	rpctypes.ErrEmptyKey, rpctypes.ErrRoleNotGranted,
	rpctypes.ErrUserNotFound, rpctypes.ErrRoleNotFound,
}

// ambiguousEtcd are the etcd errors whose request may have been applied.
var ambiguousEtcd = []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToConnectionLost,
	rpctypes.ErrTimeoutDueToLeaderFail, context.DeadlineExceeded}

// Classify sorts err into a Class. It is the one place etcdpool's binaries
// classify etcd and gRPC errors. An error it does not recognize is
// Transient: a process that keeps running retries it, with backoff.
func Classify(err error) Class {
	if typed, ok := cancelled(err); ok {
		err = typed
	}
	switch {
	case err == nil:
		return None
	case errors.Is(err, ErrPermissionDenied), errors.Is(err, ErrAuthFailed), errors.Is(err, ErrTLS):
		return Permanent
	case errors.Is(err, context.Canceled):
		return Ambiguous
	}
	for _, e := range permanentEtcd {
		if errors.Is(err, e) {
			return Permanent
		}
	}
	for _, e := range ambiguousEtcd {
		if errors.Is(err, e) {
			return Ambiguous
		}
	}
	if isTLS(err) {
		return Permanent
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
			return Permanent
		case codes.DeadlineExceeded, codes.Canceled:
			return Ambiguous
		}
	}
	return Transient
}

// WatchErr is wr.Err(), with the etcd error restored when etcd cancelled
// the watch (see cancelled): errors.Is(WatchErr(wr),
// rpctypes.ErrPermissionDenied) holds for a watch refused for want of
// permission, as for any other request refused so.
func WatchErr(wr clientv3.WatchResponse) error {
	err := wr.Err()
	if typed, ok := cancelled(err); ok {
		return fmt.Errorf("watch cancelled by etcd: %w", typed)
	}
	return err
}

// cancelled returns the etcd error whose text err, or an error it wraps,
// carries when it is the error of a watch that etcd cancelled. clientv3
// hands such a watch the cancel reason, which is a gRPC status's text
// ("rpc error: code = PermissionDenied desc = etcdserver: permission
// denied"), as a plain error (client v3.7.3, watch.go addSubstream); so
// neither errors.Is nor status.FromError recognise it, and a watch etcd
// refuses would be retried as a transient failure forever. etcd cancels a
// watch that way when it is opened, or re-opened after a reconnect,
// without read permission on its range.
func cancelled(err error) (error, bool) {
	var typed rpctypes.EtcdError
	if _, ok := status.FromError(err); ok || errors.As(err, &typed) {
		return nil, false // nil, a gRPC status or an etcd error: classified as it is
	}
	for ; err != nil; err = errors.Unwrap(err) {
		rest, ok := strings.CutPrefix(err.Error(), "rpc error: code = ")
		if !ok {
			continue
		}
		_, desc, ok := strings.Cut(rest, " desc = ")
		if !ok {
			continue
		}
		if typed, ok := rpctypes.Error(errors.New(desc)).(rpctypes.EtcdError); ok {
			return typed, true
		}
	}
	return nil, false
}

// IsPermanent reports whether err is Permanent.
func IsPermanent(err error) bool { return Classify(err) == Permanent }

// Denied reports whether err is etcd refusing who we are or what we ask:
// permission denied by RBAC, or authentication failed.
func Denied(err error) bool {
	if errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrAuthFailed) ||
		errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrAuthFailed) ||
		errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrInvalidAuthToken) {
		return true
	}
	if s, ok := status.FromError(err); ok {
		return s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated
	}
	return false
}

// isTLS reports a handshake failure that gRPC flattened into a status
// message. gRPC keeps no typed cause, so this one check reads the text.
func isTLS(err error) bool {
	s, ok := status.FromError(err)
	if !ok || s.Code() != codes.Unavailable {
		return false
	}
	m := s.Message()
	return strings.Contains(m, "authentication handshake failed") || strings.Contains(m, "x509: ")
}

// OpError is a permanent error of one request, naming the operation and
// the key or prefix it touched, e.g. "read /etcdpool/pools/gpu/".
type OpError struct {
	// Op is what was asked: "read", "write", "watch", "lease".
	Op string
	// Key is the key or prefix (with a trailing "/" for a prefix).
	Key string
	// Err is etcd's error.
	Err error
}

// Error implements error.
func (e *OpError) Error() string {
	return fmt.Sprintf("etcd refused %s of %s: %v", e.Op, e.Key, Cause(e.Err))
}

// Unwrap returns the etcd error.
func (e *OpError) Unwrap() error { return e.Err }

// Op returns err wrapped in an OpError when it is Permanent, and err
// unchanged otherwise, or when an OpError in it names its request already.
func Op(op, key string, err error) error {
	var named *OpError
	if !IsPermanent(err) || errors.As(err, &named) {
		return err
	}
	return &OpError{Op: op, Key: key, Err: err}
}

// Cause is the short text of an etcd error: "permission denied" rather
// than "etcdserver: permission denied", and a gRPC status's message alone.
func Cause(err error) string {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return strings.TrimPrefix(ee.Error(), "etcdserver: ")
	}
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}
