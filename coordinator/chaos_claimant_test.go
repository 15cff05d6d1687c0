package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdpool/etcdpool/coordinator"
)

// The chaos test's claimants are real processes: this test binary started
// with claimantEnv set. Each runs Workers claimants (sessions) on one
// Coordinator, so that what a process shares between its claimants (the
// pool feed, hand-offs between them, seats steered apart) meets the faults
// too. Each claims with wait, holds for a moment while making writes fenced
// by its token, releases, and again. It reports on
// stdout, as JSON lines, what the checkers need and only it can see: when
// each successful txn was sent, each grant, and when each claim's Done was
// observed to close, and why.

const claimantEnv = "ETCDPOOL_CHAOS_CLAIMANT"

// giveUpOdds: one claim in giveUpOdds has a short deadline (holdOnce).
const giveUpOdds = 4

type claimantConfig struct {
	ID        string        `json:"id"`
	Endpoints []string      `json:"endpoints"`
	Prefix    string        `json:"prefix"`
	Pool      string        `json:"pool"`
	TTL       time.Duration `json:"ttl"`
	Fenced    string        `json:"fenced"` // prefix of the fenced downstream keys
	Workers   int           `json:"workers"`
	Tenants   []string      `json:"tenants"` // worker i's tenant, "" (or none listed): none
	// Selects is worker i's instance selector: "" (or none listed) none,
	// "key=value" a label, else an instance's name.
	Selects []string `json:"selects"`
}

// selector returns the claim option of worker w's instance selector.
func (cfg claimantConfig) selector(w int) []coordinator.ClaimOption {
	if w >= len(cfg.Selects) || cfg.Selects[w] == "" {
		return nil
	}
	if k, v, ok := strings.Cut(cfg.Selects[w], "="); ok {
		return []coordinator.ClaimOption{coordinator.WithLabels(map[string]string{k: v})}
	}
	return []coordinator.ClaimOption{coordinator.WithInstance(cfg.Selects[w])}
}

// claimantEvent is one line of a claimant's report.
type claimantEvent struct {
	Ev       string `json:"ev"` // txn, granted, done, gaveup
	Claimant string `json:"claimant,omitempty"`
	Rev      int64  `json:"rev,omitempty"` // txn: its revision
	Seat     int    `json:"seat,omitempty"`
	Token    int64  `json:"token,omitempty"`
	At       int64  `json:"at"` // unix nanos: txn sent, grant returned, Done observed
	Err      string `json:"err,omitempty"`
	Released bool   `json:"released,omitempty"`
	Op       string `json:"op,omitempty"`   // retry: the step retried
	Wait     int64  `json:"wait,omitempty"` // retry: its backoff, in nanoseconds
}

// retryReporter reports the coordinator's retries as events.
type retryReporter struct {
	coordinator.NoopMetrics
	rep *reporter
}

func (r retryReporter) Retry(_, op string, wait time.Duration) {
	r.rep.emit(claimantEvent{Ev: "retry", Op: op, Wait: int64(wait), At: time.Now().UnixNano()})
}

type reporter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (r *reporter) emit(e claimantEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.enc.Encode(e)
}

func runClaimantIfChild() {
	v := os.Getenv(claimantEnv)
	if v == "" {
		return
	}
	var cfg claimantConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "claimant:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := runClaimant(ctx, cfg, &reporter{enc: json.NewEncoder(os.Stdout)}); err != nil {
		fmt.Fprintln(os.Stderr, "claimant:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runClaimant(ctx context.Context, cfg claimantConfig, rep *reporter) error {
	record := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		at := time.Now().UnixNano()
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := reply.(*pb.TxnResponse); ok && err == nil && r.Succeeded {
			rep.emit(claimantEvent{Ev: "txn", Rev: r.Header.Revision, At: at})
		}
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(record)}})
	if err != nil {
		return err
	}
	defer cli.Close()
	c, err := coordinator.New(cli, coordinator.WithPrefix(cfg.Prefix), coordinator.WithCleanupTimeout(2*time.Second),
		coordinator.WithMetrics(retryReporter{rep: rep}))
	if err != nil {
		return err
	}
	defer c.Close()
	var wg sync.WaitGroup
	for w := range max(cfg.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := ""
			if w < len(cfg.Tenants) {
				tenant = cfg.Tenants[w]
			}
			opts := append(cfg.selector(w), coordinator.WithTenant(tenant), coordinator.WithHolder(fmt.Sprintf("%s.%d", cfg.ID, w)), coordinator.WithWait())
			work(ctx, c, cli, opts, cfg, rep)
		}()
	}
	wg.Wait()
	return nil
}

// work is one claimant of the process: a session, renewed when it ends, and
// holdOnce, claiming with opts (its tenant, instance selector, holder name
// and wait), until ctx ends.
func work(ctx context.Context, c *coordinator.Coordinator, cli *clientv3.Client, opts []coordinator.ClaimOption, cfg claimantConfig, rep *reporter) {
	var s *coordinator.Session
	for ctx.Err() == nil {
		if s == nil || s.Err() != nil {
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			var err error
			s, err = coordinator.NewSession(sctx, cli, coordinator.WithTTL(cfg.TTL))
			cancel()
			if err != nil {
				s = nil
				time.Sleep(100 * time.Millisecond)
				continue
			}
		}
		holdOnce(ctx, c, cli, s, opts, cfg, rep)
	}
	if s != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = s.Close(cctx)
	}
}

// holdOnce claims, holds for up to 200 ms making fenced writes every 20 ms
// while Done is open, and releases. One claim in giveUpOdds gives up after
// up to 300 ms, in its wait or in a txn, as a caller whose deadline passed:
// what it leaves (a queue key, a seat granted as it left) must not hold up
// the others.
func holdOnce(ctx context.Context, c *coordinator.Coordinator, cli *clientv3.Client, s *coordinator.Session, opts []coordinator.ClaimOption, cfg claimantConfig, rep *reporter) {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if rand.IntN(giveUpOdds) == 0 {
		cctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(300))*time.Millisecond)
	}
	cl, err := c.Claim(cctx, s, cfg.Pool, opts...)
	gaveUp := cctx.Err() != nil && ctx.Err() == nil
	cancel()
	if err != nil {
		if gaveUp {
			rep.emit(claimantEvent{Ev: "gaveup", At: time.Now().UnixNano()})
		}
		time.Sleep(20 * time.Millisecond)
		return
	}
	rep.emit(claimantEvent{Ev: "granted", Seat: cl.Seat(), Token: cl.Token(), At: time.Now().UnixNano()})
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		<-cl.Done()
		err := cl.Err()
		rep.emit(claimantEvent{Ev: "done", Seat: cl.Seat(), Token: cl.Token(), At: time.Now().UnixNano(),
			Err: err.Error(), Released: errors.Is(err, coordinator.ErrReleased)})
	}()
	val, _ := json.Marshal(map[string]any{"seat": cl.Seat(), "token": cl.Token()})
	for end := time.Now().Add(time.Duration(rand.IntN(200)) * time.Millisecond); time.Now().Before(end); {
		select {
		case <-cl.Done():
			<-observed
			return
		case <-time.After(20 * time.Millisecond):
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		_, _ = cli.Txn(wctx).If(cl.IsOwner()).Then(clientv3.OpPut(fmt.Sprintf("%s%d", cfg.Fenced, cl.Seat()), string(val))).Commit()
		cancel()
	}
	for try := 0; try < 5; try++ { // etcd may be electing; the release is idempotent
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := cl.Release(rctx)
		cancel()
		if err == nil || errors.Is(err, coordinator.ErrNotHeld) || s.Err() != nil {
			break
		}
	}
	select {
	case <-observed: // a cut-off holder: Done closes at its session's deadline
	case <-time.After(cfg.TTL + 2*time.Second):
	}
}
