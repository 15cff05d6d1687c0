package cli

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

// eventStream is poolctl watch's stream: it watches prefix from a
// revision, resumes after a break where it stopped, and re-lists only
// when etcd compacted the history it needed (never resuming at a
// compacted revision). Every break and resync is reported through warn; a
// watch etcd refuses (permission denied) ends the stream with that error.
type eventStream struct {
	cli    *clientv3.Client
	tr     translator
	prefix string
	// from is the first revision to deliver; 0 means the next one.
	from int64
	// head is etcd's revision when the stream started: events up to it
	// are replayed history.
	head int64
	// warn reports a break, a resume or a resync (on stderr).
	warn func(format string, args ...any)
	// retry is the pause before re-watching after a break.
	retry time.Duration
}

// compactedError is a watch whose start revision etcd compacted away.
type compactedError struct{ from, compacted int64 }

func (e compactedError) Error() string {
	return fmt.Sprintf("revision %d was compacted: etcd keeps history after revision %d only", e.from, e.compacted)
}

// errStreamClosed is a watch channel that closed without an error.
var errStreamClosed = errors.New("the watch stream closed")

// start returns the first revision to deliver: from, or the revision
// after the current one.
func (s *eventStream) start(ctx context.Context) (int64, error) {
	cur, err := s.list(ctx)
	if err != nil {
		return 0, err
	}
	s.head = cur
	if s.from != 0 {
		return s.from, nil
	}
	return cur + 1, nil
}

// run delivers events from revision rev to emit until ctx ends (nil), emit
// fails, or the revision asked for with from is compacted (an error
// naming it).
func (s *eventStream) run(ctx context.Context, rev int64, emit func(watchEvent) error) error {
	for {
		next, err := s.follow(ctx, rev, emit)
		var ce compactedError
		var ee emitError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &ee):
			return ee.err
		case errors.As(err, &ce) && s.from != 0 && next == s.from:
			// Nothing was delivered from the revision asked for.
			return fmt.Errorf("--rev %d: %w (use --rev %d or later, or no --rev)", s.from, err, ce.compacted+1)
		case etcdclient.IsPermanent(err):
			return err // etcd refuses the watch (permission denied): retrying cannot help
		case errors.As(err, &ce):
			if next, err = s.resync(ctx, next, ce, emit); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		default:
			s.warn("watch: the event stream broke (%s); resuming from revision %d", Message(err), next)
			if !retry.Sleep(ctx, s.retry) {
				return nil
			}
		}
		rev = next
	}
}

// emitError is a failure of emit (writing the event): it ends the stream.
type emitError struct{ err error }

func (e emitError) Error() string { return e.err.Error() }

// follow watches from rev and returns the revision to resume from and why
// the watch ended.
func (s *eventStream) follow(ctx context.Context, rev int64, emit func(watchEvent) error) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.cli.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithPrevKV())
	for wr := range wch {
		if wr.CompactRevision != 0 {
			return rev, compactedError{from: rev, compacted: wr.CompactRevision}
		}
		if err := etcdclient.WatchErr(wr); err != nil {
			return rev, err
		}
		for _, ev := range s.tr.translate(wr.Events) {
			if ev.TimeSource == timeReceived && ev.Revision <= s.head {
				ev.TimeSource = timeReplayed
			}
			if err := emit(ev); err != nil {
				return rev, emitError{err}
			}
		}
		if n := len(wr.Events); n > 0 {
			rev = wr.Events[n-1].Kv.ModRevision + 1
		}
	}
	return rev, errStreamClosed
}

// resync re-lists after a compaction, says so, sends EventResync and
// returns the revision to watch from.
func (s *eventStream) resync(ctx context.Context, from int64, ce compactedError, emit func(watchEvent) error) (int64, error) {
	for {
		cur, err := s.list(ctx)
		if err == nil {
			s.warn("watch: etcd compacted history this watch still needed (compacted at revision %d): "+
				"events from revision %d through %d are missing; resynced at revision %d", ce.compacted, from, cur, cur)
			ev := watchEvent{Event: coordinator.Event{Type: coordinator.EventResync, Seat: -1, Revision: cur, Time: s.tr.now().UTC()},
				TimeSource: timeReceived}
			if err := emit(ev); err != nil {
				return 0, err
			}
			return cur + 1, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if !retry.Sleep(ctx, s.retry) {
			return 0, ctx.Err()
		}
	}
}

// list returns the current revision of the watched prefix.
func (s *eventStream) list(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
