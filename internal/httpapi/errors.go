package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Sentinel errors of the API. Handlers wrap them (and the coordinator's)
// with %w; statusOf maps every error to its status and code in one place.
var (
	// ErrInvalidInput reports a malformed request: bad JSON, a bad name, a
	// value out of range.
	ErrInvalidInput = errors.New("httpapi: invalid input")
	// ErrUnauthenticated reports a request without valid credentials.
	ErrUnauthenticated = errors.New("httpapi: unauthenticated")
	// ErrForbidden reports a principal acting outside its grants, or
	// through another principal's session.
	ErrForbidden = errors.New("httpapi: forbidden")
	// ErrSessionGone reports a session whose lease has expired or was
	// revoked.
	ErrSessionGone = errors.New("httpapi: session gone")
	// ErrWaitTimeout reports a claim whose wait ended before a seat was
	// granted; it left no place in the queue behind.
	ErrWaitTimeout = errors.New("httpapi: wait timed out")
	// ErrNotFound reports an unknown path.
	ErrNotFound = errors.New("httpapi: not found")
	// ErrUnavailable reports that etcd did not answer in time, or that the
	// replica could not confirm a session's lease: retry, perhaps on
	// another replica.
	ErrUnavailable = errors.New("httpapi: unavailable")
)

// Error codes, the "code" field of every error body. Each names one
// outcome a client acts on; the status is the HTTP status sent with it.
const (
	CodeInvalidInput    = "invalid_input"   // 400
	CodeUnauthenticated = "unauthenticated" // 401
	CodeForbidden       = "forbidden"       // 403
	CodeNotFound        = "not_found"       // 404: pool, seat, instance or path
	CodeNotHeld         = "not_held"        // 404: the seat is not held by this session
	CodeWaitTimeout     = "wait_timeout"    // 408
	CodeNoSeat          = "no_seat"         // 409, with reason
	CodeConflict        = "conflict"        // 409: a concurrent change; retry
	CodeSessionGone     = "session_gone"    // 410
	CodeStaleToken      = "stale_token"     // 412
	CodeUnavailable     = "unavailable"     // 503: etcd did not answer
	CodeInternal        = "internal"        // 500
)

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	// Code is one of the Code* constants.
	Code string `json:"code"`
	// Reason says why no seat was free (coordinator.WaitReason), for
	// no_seat only.
	Reason string `json:"reason,omitempty"`
	// Message is for people.
	Message string `json:"message"`
}

// statusOf maps err to its HTTP status and body: the one place where
// errors become status codes.
func statusOf(err error) (int, ErrorBody) {
	b := ErrorBody{Message: err.Error()}
	var ns *coordinator.NoSeatError
	switch {
	case errors.As(err, &ns):
		b.Code, b.Reason = CodeNoSeat, string(ns.Reason)
		return http.StatusConflict, b
	case errors.Is(err, coordinator.ErrNoSeat):
		b.Code = CodeNoSeat
		return http.StatusConflict, b
	case errors.Is(err, ErrInvalidInput), errors.Is(err, coordinator.ErrInvalid):
		b.Code = CodeInvalidInput
		return http.StatusBadRequest, b
	case errors.Is(err, ErrUnauthenticated):
		b.Code = CodeUnauthenticated
		return http.StatusUnauthorized, b
	case errors.Is(err, ErrForbidden):
		b.Code = CodeForbidden
		return http.StatusForbidden, b
	case errors.Is(err, ErrSessionGone), errors.Is(err, coordinator.ErrSessionExpired):
		b.Code = CodeSessionGone
		return http.StatusGone, b
	case errors.Is(err, ErrWaitTimeout):
		b.Code = CodeWaitTimeout
		return http.StatusRequestTimeout, b
	case errors.Is(err, coordinator.ErrStaleToken):
		b.Code = CodeStaleToken
		return http.StatusPreconditionFailed, b
	case errors.Is(err, coordinator.ErrNotHeld), errors.Is(err, coordinator.ErrSeatNotFound):
		b.Code = CodeNotHeld
		return http.StatusNotFound, b
	case errors.Is(err, ErrNotFound), errors.Is(err, coordinator.ErrPoolNotFound), errors.Is(err, coordinator.ErrInstanceNotFound):
		b.Code = CodeNotFound
		return http.StatusNotFound, b
	case errors.Is(err, coordinator.ErrConflict), errors.Is(err, coordinator.ErrPoolExists), errors.Is(err, coordinator.ErrPoolInUse):
		b.Code = CodeConflict
		return http.StatusConflict, b
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, coordinator.ErrClosed), errors.Is(err, ErrUnavailable), etcdUnavailable(err):
		b.Code = CodeUnavailable
		return http.StatusServiceUnavailable, b
	}
	b.Code = CodeInternal
	return http.StatusInternalServerError, b
}

// writeError sends err as its status and JSON body.
func writeError(w http.ResponseWriter, err error) {
	status, body := statusOf(err)
	writeBody(w, status, body)
}

// internalMessage is the message of a 500: its cause may carry etcd key
// paths and other holders' data, so it goes to the server's log only,
// under ref.
func internalMessage(ref string) string {
	return "internal error; the server's log has its cause under ref " + ref
}

// errorRef returns a random reference that ties an answer to its log line.
func errorRef() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeBody sends an error's status and body.
func writeBody(w http.ResponseWriter, status int, body ErrorBody) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="etcdpool"`)
	}
	writeJSON(w, status, body)
}

// writeJSON sends v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// etcdUnavailable reports whether err is etcd not answering (no leader,
// no connection) or turning requests away for a while (too many requests),
// as opposed to refusing the request: a retry may pass.
func etcdUnavailable(err error) bool {
	code := codes.OK
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.ResourceExhausted
}
