package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
	"github.com/etcdpool/etcdpool/internal/retry"
)

// openSession grants a lease of ttl, retrying with backoff while etcd
// cannot be reached, until ctx ends; then it returns the last error. An
// invalid TTL, and a refusal that retrying cannot pass (authentication
// failed, say: the agent's user deleted), are returned at once. Each failed keepalive of the session is
// logged at debug level and reported to the keepalive-failure hook.
func (o options) openSession(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*coordinator.Session, error) {
	onFailure := func(err error) {
		o.log.Debug("keepalive failed", "err", err)
		o.onKeepAliveFailure(err)
	}
	var sess *coordinator.Session
	err := retry.Do(ctx, reachPolicy, func() error {
		rctx, cancel := context.WithTimeout(ctx, o.requestTimeout)
		defer cancel()
		var err error
		sess, err = coordinator.NewSession(rctx, cli, coordinator.WithTTL(ttl), coordinator.WithKeepAliveFailure(onFailure))
		if errors.Is(err, coordinator.ErrInvalid) || etcdclient.IsPermanent(err) {
			return retry.Permanent(err)
		}
		return err
	}, func(err error, d time.Duration) { o.log.Warn("cannot grant lease; retrying", "err", err, "retry", d) })
	if err != nil {
		return nil, err
	}
	o.log.Info("session started", "lease", leaseHex(sess.Lease()), "ttl", sess.TTL())
	return sess, nil
}

// closeSession revokes sess's lease, bounded by the request timeout; a
// lease that cannot be revoked expires after its TTL.
func (o options) closeSession(sess *coordinator.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), o.requestTimeout)
	defer cancel()
	if err := sess.Close(ctx); err != nil {
		o.log.Warn("cannot revoke lease; it expires after its TTL", "lease", leaseHex(sess.Lease()), "err", err)
	}
}

func leaseHex(id clientv3.LeaseID) string { return fmt.Sprintf("%x", int64(id)) }
