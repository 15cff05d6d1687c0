package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Sessions. A session is an etcd lease; its handle is "<lease hex>.<secret
// hex>". The record <root>/api/sessions/<lease hex>, bound to the lease,
// holds the owning principal and the SHA-256 of the secret, so that any
// replica can check a handle, and the record goes with the lease. A
// replica keeps nothing that a client needs: it caches records (a lease's
// record never changes while it lives) and borrows the leases it claims
// on (coordinator.BorrowSession), but never keeps a lease alive by itself.

// secretLen is the number of random bytes in a handle's secret.
const secretLen = 16

// sessionRecord is the JSON value of a session's record.
type sessionRecord struct {
	Principal string    `json:"principal"`
	SecretSHA string    `json:"secretSHA256"`
	Created   time.Time `json:"created"`
}

// handle is a parsed session handle.
type handle struct {
	lease  clientv3.LeaseID
	secret string // hex
}

// String returns the handle as clients send it.
func (h handle) String() string { return fmt.Sprintf("%016x.%s", int64(h.lease), h.secret) }

// parseHandle checks a handle's syntax.
func parseHandle(s string) (handle, error) {
	l, sec, ok := strings.Cut(s, ".")
	id, err := strconv.ParseUint(l, 16, 64)
	if !ok || err != nil || len(l) != 16 || id == 0 || len(sec) != 2*secretLen {
		return handle{}, fmt.Errorf("%w: session %q is not a session handle", ErrInvalidInput, shorten(s))
	}
	if _, err := hex.DecodeString(sec); err != nil {
		return handle{}, fmt.Errorf("%w: session %q is not a session handle", ErrInvalidInput, shorten(s))
	}
	return handle{lease: clientv3.LeaseID(id), secret: sec}, nil
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func hashSecret(sec string) string {
	sum := sha256.Sum256([]byte(sec))
	return hex.EncodeToString(sum[:])
}

// sessionKey is the record's key.
func sessionKey(root string, lease clientv3.LeaseID) string {
	return fmt.Sprintf("%s/api/sessions/%016x", root, int64(lease))
}

// sessions is a replica's cache of session records and borrowed leases.
type sessions struct {
	cli  *clientv3.Client
	root string
	idle time.Duration // an unused entry is dropped after this long

	mu sync.Mutex
	m  map[clientv3.LeaseID]*sessionEntry
}

// sessionEntry is one cached session.
type sessionEntry struct {
	rec  sessionRecord
	sess *coordinator.Session // borrowed; nil until a claim needs it
	refs int                  // requests using sess
	used time.Time
	// claims this replica granted to the session and that are not
	// released yet, so that a release here is one txn (no Adopt).
	claims map[claimID]*coordinator.Claim
}

// claimID names a claim: its seat and token.
type claimID struct {
	pool  string
	seat  int
	token int64
}

// maxCachedClaims bounds the claims cached per session; past it, claims
// are found again with Adopt.
const maxCachedClaims = 256

func newSessions(cli *clientv3.Client, root string, idle time.Duration) *sessions {
	return &sessions{cli: cli, root: root, idle: idle, m: map[clientv3.LeaseID]*sessionEntry{}}
}

// create grants a lease of ttl and writes its record for principal.
func (ss *sessions) create(ctx context.Context, principal string, ttl time.Duration) (handle, time.Duration, error) {
	b := make([]byte, secretLen)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	sec := hex.EncodeToString(b)
	g, err := ss.cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return handle{}, 0, fmt.Errorf("grant lease: %w", err)
	}
	h := handle{lease: g.ID, secret: sec}
	rec := sessionRecord{Principal: principal, SecretSHA: hashSecret(sec), Created: time.Now().UTC()}
	val, _ := json.Marshal(rec)
	key := sessionKey(ss.root, g.ID)
	resp, err := ss.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("record of lease %x exists already", g.ID)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, _ = ss.cli.Revoke(rctx, g.ID)
		cancel()
		return handle{}, 0, fmt.Errorf("write session record: %w", err)
	}
	ss.mu.Lock()
	ss.m[g.ID] = &sessionEntry{rec: rec, used: time.Now()}
	ss.mu.Unlock()
	return h, time.Duration(g.TTL) * time.Second, nil
}

// verify checks that h is a live session of principal and returns its
// lease; the record comes from the cache or from etcd.
func (ss *sessions) verify(ctx context.Context, h handle, principal string) error {
	ss.mu.Lock()
	e := ss.m[h.lease]
	if e != nil {
		e.used = time.Now()
	}
	ss.mu.Unlock()
	var rec sessionRecord
	if e != nil {
		rec = e.rec
	} else {
		resp, err := ss.cli.Get(ctx, sessionKey(ss.root, h.lease))
		if err != nil {
			return fmt.Errorf("read session: %w", err)
		}
		if len(resp.Kvs) == 0 {
			return fmt.Errorf("%w: session %016x expired or was deleted", ErrSessionGone, int64(h.lease))
		}
		if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
			return fmt.Errorf("session %016x has a malformed record: %v", int64(h.lease), err)
		}
	}
	if subtle.ConstantTimeCompare([]byte(rec.SecretSHA), []byte(hashSecret(h.secret))) != 1 {
		return fmt.Errorf("%w: wrong secret for session %016x", ErrForbidden, int64(h.lease))
	}
	if rec.Principal != principal {
		return fmt.Errorf("%w: session %016x belongs to another principal", ErrForbidden, int64(h.lease))
	}
	if e == nil {
		ss.mu.Lock()
		if ss.m[h.lease] == nil {
			ss.m[h.lease] = &sessionEntry{rec: rec, used: time.Now()}
		}
		ss.mu.Unlock()
	}
	return nil
}

// borrow verifies h and returns the lease as a borrowed session, for one
// request; call done when the request is over.
func (ss *sessions) borrow(ctx context.Context, h handle, principal string) (s *coordinator.Session, done func(), err error) {
	if err := ss.verify(ctx, h, principal); err != nil {
		return nil, nil, err
	}
	ss.mu.Lock()
	e := ss.m[h.lease]
	if e != nil && e.sess != nil && e.sess.Err() == nil {
		e.refs++
		s = e.sess
	}
	ss.mu.Unlock()
	if s == nil {
		if s, err = ss.borrowNew(ctx, h.lease); err != nil {
			return nil, nil, err
		}
	}
	return s, func() { ss.put(h.lease) }, nil
}

// borrowNew borrows the lease and installs it in the cache.
func (ss *sessions) borrowNew(ctx context.Context, lease clientv3.LeaseID) (*coordinator.Session, error) {
	s, err := coordinator.BorrowSession(ctx, ss.cli, lease)
	if err != nil {
		if errors.Is(err, coordinator.ErrSessionExpired) && !errors.Is(err, coordinator.ErrLeaseEnding) {
			ss.drop(lease) // gone; one that is ending may still be renewed
		}
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e := ss.m[lease]
	if e == nil { // dropped meanwhile: the session was deleted
		go s.Close(context.Background())
		return nil, fmt.Errorf("%w: session %016x was deleted", ErrSessionGone, int64(lease))
	}
	if e.sess != nil && e.sess.Err() == nil { // another request won the race
		go s.Close(context.Background())
		s = e.sess
	} else {
		if e.sess != nil {
			go e.sess.Close(context.Background())
		}
		e.sess = s
	}
	e.refs++
	e.used = time.Now()
	return s, nil
}

// put ends one request's use of a borrowed lease.
func (ss *sessions) put(lease clientv3.LeaseID) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if e := ss.m[lease]; e != nil {
		e.refs--
		e.used = time.Now()
	}
}

// drop forgets a session whose lease is gone (deleted or expired). A
// borrowed lease still in use by a request is left to end by itself: it
// sees the lease gone within TTL/3, and its claims report why.
func (ss *sessions) drop(lease clientv3.LeaseID) {
	ss.mu.Lock()
	e := ss.m[lease]
	delete(ss.m, lease)
	idle := e != nil && e.sess != nil && e.refs == 0
	ss.mu.Unlock()
	if idle {
		go e.sess.Close(context.Background()) // borrowed: never revokes
	}
}

// sweep drops entries unused for longer than idle and borrowed leases that
// have ended; it returns how many entries remain.
func (ss *sessions) sweep(now time.Time) int {
	ss.mu.Lock()
	var closing []*coordinator.Session
	for id, e := range ss.m {
		if e.refs > 0 {
			continue
		}
		if now.Sub(e.used) > ss.idle {
			delete(ss.m, id)
		} else if e.sess == nil || e.sess.Err() == nil {
			continue
		}
		if e.sess != nil {
			closing = append(closing, e.sess)
			e.sess = nil
		}
	}
	n := len(ss.m)
	ss.mu.Unlock()
	for _, s := range closing {
		_ = s.Close(context.Background())
	}
	return n
}

// closeAll stops following every borrowed lease; leases are not revoked.
func (ss *sessions) closeAll() {
	ss.mu.Lock()
	m := ss.m
	ss.m = map[clientv3.LeaseID]*sessionEntry{}
	ss.mu.Unlock()
	for _, e := range m {
		if e.sess != nil {
			_ = e.sess.Close(context.Background())
		}
	}
}

// keepAlive renews the lease once and returns the TTL it now has.
func (ss *sessions) keepAlive(ctx context.Context, h handle) (time.Duration, error) {
	resp, err := ss.cli.KeepAliveOnce(ctx, h.lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
		ss.drop(h.lease)
		return 0, fmt.Errorf("%w: session %016x expired or was deleted", ErrSessionGone, int64(h.lease))
	case err != nil:
		return 0, fmt.Errorf("keepalive: %w", err)
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// revoke ends the session: its lease and every seat bound to it.
func (ss *sessions) revoke(ctx context.Context, h handle) error {
	ss.drop(h.lease)
	_, err := ss.cli.Revoke(ctx, h.lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: session %016x expired or was deleted", ErrSessionGone, int64(h.lease))
	case err != nil:
		return fmt.Errorf("revoke: %w", err)
	}
	return nil
}

// alive asks etcd whether the lease is alive; it does not renew it. etcd
// says the time left in whole seconds, rounded down: 0 is a lease with
// less than a second left, which its owner may still renew; -1 is gone.
func (ss *sessions) alive(ctx context.Context, lease clientv3.LeaseID) (bool, error) {
	resp, err := ss.cli.TimeToLive(ctx, lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return resp.TTL >= 0, nil
}

// hold keeps the borrowed session s of lease in use (not swept) until the
// returned function is called.
func (ss *sessions) hold(lease clientv3.LeaseID, s *coordinator.Session) (done func()) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if e := ss.m[lease]; e != nil && e.sess == s {
		e.refs++
		return func() { ss.put(lease) }
	}
	return func() {}
}

// remember caches a claim granted to the session of lease (detached).
func (ss *sessions) remember(lease clientv3.LeaseID, cl *coordinator.Claim) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e := ss.m[lease]
	if e == nil || len(e.claims) >= maxCachedClaims {
		return
	}
	if e.claims == nil {
		e.claims = map[claimID]*coordinator.Claim{}
	}
	e.claims[claimID{cl.Pool(), cl.Seat(), cl.Token()}] = cl
}

// take removes and returns the cached claim id of the session of lease,
// or nil.
func (ss *sessions) take(lease clientv3.LeaseID, id claimID) *coordinator.Claim {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e := ss.m[lease]
	if e == nil {
		return nil
	}
	cl := e.claims[id]
	delete(e.claims, id)
	return cl
}
