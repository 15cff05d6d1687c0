// Package embedetcd starts real etcd members inside the current process.
//
// It is used by `poolagent dev` for the zero-setup default and by
// internal/etcdtest for tests. It wraps go.etcd.io/etcd/server/v3/embed, the
// same release as the client, keeps etcd's own zap logger quiet, and serves
// gRPC only (no HTTP/JSON gateway), so that nothing in a server goroutine
// touches os.Stderr.
package embedetcd

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config describes one member. Zero values take the documented defaults.
type Config struct {
	// Name is the member name. Default "default".
	Name string
	// Dir is the data directory. Required.
	Dir string
	// ClientAddr is host:port for clients. Default "127.0.0.1:2379".
	ClientAddr string
	// PeerAddr is host:port for peers. Default "127.0.0.1:2380".
	PeerAddr string
	// InitialCluster is name=http://peer,... Default: this member alone.
	InitialCluster string
	// ExistingCluster joins or restarts with cluster state "existing".
	ExistingCluster bool
	// NoFsync trades durability for speed; for tests only. Default false.
	NoFsync bool
	// ReadyTimeout bounds the wait for the member to serve. Default 30s.
	ReadyTimeout time.Duration
	// Compaction is etcd's periodic auto-compaction: keep this much
	// history, compacting as often. Every claim writes keys named after
	// it, and until a compaction each claim's range compares walk the
	// deleted keys of earlier claims, so history must not grow unbounded.
	// Default 5m (as Kubernetes compacts); negative disables it.
	Compaction time.Duration
	// MaxTxnOps is etcd's --max-txn-ops; 0 keeps etcd's default, 128.
	// For tests of a server set lower.
	MaxTxnOps uint
}

// DefaultCompaction is the default Config.Compaction.
const DefaultCompaction = 5 * time.Minute

// Server is a running embedded member.
type Server struct {
	cfg  Config
	etcd *embed.Etcd
	lock *fileutil.LockedFile
}

// LockFile is the file in the data dir that a running member holds
// locked, so that a second member on the same dir fails at once instead
// of blocking on etcd's own database lock.
const LockFile = "embedetcd.lock"

var (
	// ErrAddrInUse reports that a listen address is taken by another process.
	ErrAddrInUse = errors.New("embedetcd: address already in use")
	// ErrDirInUse reports that another member (in this process or another)
	// runs on the data dir.
	ErrDirInUse = errors.New("embedetcd: data dir in use")
)

// Start starts a member and waits until it is ready to serve clients, or
// until ReadyTimeout passes. It first locks LockFile in the data dir and
// returns ErrDirInUse at once if another member holds it; the lock is
// released by Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedetcd: data dir is required")
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if cfg.ClientAddr == "" {
		cfg.ClientAddr = "127.0.0.1:2379"
	}
	if cfg.PeerAddr == "" {
		cfg.PeerAddr = "127.0.0.1:2380"
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	lock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	srv, err := start(cfg)
	if err != nil {
		lock.Close()
		return nil, err
	}
	srv.lock = lock
	return srv, nil
}

// lockDir creates dir if needed and locks its LockFile without waiting.
func lockDir(dir string) (*fileutil.LockedFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedetcd: data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockFile)
	lock, err := fileutil.TryLockFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if errors.Is(err, fileutil.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is locked (%s) by another etcd member; is another poolagent dev running on it?", ErrDirInUse, dir, path)
	}
	if err != nil {
		return nil, fmt.Errorf("embedetcd: lock data dir %s: %w", dir, err)
	}
	return lock, nil
}

func start(cfg Config) (*Server, error) {
	for _, a := range []string{cfg.ClientAddr, cfg.PeerAddr} {
		if err := checkFree(a); err != nil {
			return nil, err
		}
	}
	ec, err := embedConfig(cfg)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		if strings.Contains(err.Error(), "address already in use") {
			return nil, fmt.Errorf("%w: %v", ErrAddrInUse, err)
		}
		return nil, fmt.Errorf("embedetcd: start %s: %w", cfg.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return &Server{cfg: cfg, etcd: e}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedetcd: %s failed: %w", cfg.Name, err)
	case <-time.After(cfg.ReadyTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedetcd: %s not ready within %v", cfg.Name, cfg.ReadyTimeout)
	}
}

func embedConfig(cfg Config) (*embed.Config, error) {
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	cu, err := url.Parse("http://" + cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: client address %q: %w", cfg.ClientAddr, err)
	}
	pu, err := url.Parse("http://" + cfg.PeerAddr)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: peer address %q: %w", cfg.PeerAddr, err)
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = cfg.Name + "=" + pu.String()
	}
	if cfg.ExistingCluster {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	ec.UnsafeNoFsync = cfg.NoFsync
	if cfg.MaxTxnOps > 0 {
		ec.MaxTxnOps = cfg.MaxTxnOps
	}
	if c := cfg.Compaction; c >= 0 {
		if c == 0 {
			c = DefaultCompaction
		}
		ec.AutoCompactionMode, ec.AutoCompactionRetention = "periodic", c.String()
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// The HTTP/JSON gateway (/v3/ over HTTP) is off: etcdpool and etcdctl
	// speak gRPC, and the gateway's websocket proxy builds a logrus logger
	// on os.Stderr in a server goroutine, after Start returns. That read
	// races with `go test -json`, which swaps os.Stderr while tests run
	// ("race detected outside of test execution").
	ec.EnableGRPCGateway = false
	return ec, nil
}

// checkFree gives a clear error for a taken port before etcd tries it.
func checkFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if strings.Contains(err.Error(), "address already in use") {
			return fmt.Errorf("%w: %s (is another etcd or poolagent running?)", ErrAddrInUse, addr)
		}
		return fmt.Errorf("embedetcd: listen %s: %w", addr, err)
	}
	return l.Close()
}

// ClientURL returns the URL clients should dial.
func (s *Server) ClientURL() string { return "http://" + s.cfg.ClientAddr }

// Config returns the configuration the member was started with.
func (s *Server) Config() Config { return s.cfg }

// IsLeader reports whether this member is the raft leader.
func (s *Server) IsLeader() bool {
	return s.etcd.Server.Leader() == s.etcd.Server.MemberID()
}

// Err reports fatal server errors.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the member and waits for it to release its ports and files,
// then unlocks the data dir. The data dir is kept.
func (s *Server) Close() {
	s.etcd.Server.Stop()
	s.etcd.Close()
	s.lock.Close()
}
