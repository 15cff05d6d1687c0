package agent

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/internal/etcdclient"
)

// MaxReconnectDelay caps the client's reconnect backoff, so that an agent
// notices within seconds that etcd is back after an outage. gRPC's own cap
// is two minutes.
const MaxReconnectDelay = etcdclient.MaxReconnectDelay

// NewClient returns an etcd client for cfg, built by etcdclient as poolctl
// builds its own. It does not wait for a connection: requests fail or
// block until etcd is reachable. The client's zap logger is silenced;
// callers log through slog.
func NewClient(cfg config.Etcd) (*clientv3.Client, error) {
	return etcdclient.New(cfg.Client())
}
