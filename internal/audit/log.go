package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/etcdpool/etcdpool/coordinator"
)

// Log is an audit log being written. Open it, Run it, then Close it.
type Log struct {
	w    io.Writer
	f    *os.File // nil for stdout
	name string
	pos  position
}

// Open opens the audit log at path for appending, creating it with mode
// 0640 if needed, and finds where it resumes. path "-" writes to stdout
// and starts at the current revision.
func Open(path string, stdout io.Writer) (*Log, error) {
	if path == "" {
		return nil, fmt.Errorf("audit log: empty path (use - for stdout)")
	}
	if path == "-" {
		return &Log{w: stdout, name: "stdout"}, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	pos, partial, err := resumePoint(f)
	if err == nil && partial {
		_, err = f.Write([]byte("\n")) // end the torn line; its event is written again
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	return &Log{w: f, f: f, name: path, pos: pos}, nil
}

// ResumesAfter returns the revision after which the log resumes, 0 for the
// current revision.
func (l *Log) ResumesAfter() int64 { return l.pos.after }

// Close closes the file, after syncing it.
func (l *Log) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Sync()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Start starts writing the events of pools (every pool when empty) and
// returns once the stream is established: every change committed after
// Start returns is written. It writes until ctx ends or the Coordinator is
// closed; wait then returns nil. A failed write stops the log, and wait
// returns its error; a restart resumes from the last record written.
func (l *Log) Start(ctx context.Context, co *coordinator.Coordinator, pools []string, log *slog.Logger) (wait func() error) {
	watch, include := "", map[string]bool{}
	if len(pools) == 1 {
		watch = pools[0]
	}
	for _, p := range pools {
		include[p] = true
	}
	events := co.WatchFrom(ctx, watch, l.pos.after)
	log.Info("audit log started", "file", l.name, "resumesAfterRevision", l.pos.after)
	done := make(chan error, 1)
	go func() {
		err := l.run(events, include, log)
		if err != nil {
			for range events { // drain, so that the stream can stop
			}
		}
		done <- err
	}()
	return func() error { return <-done }
}

func (l *Log) run(events <-chan coordinator.Event, include map[string]bool, log *slog.Logger) error {
	// seen is the last revision read; a revision of which records were
	// written counts as read, even if it is then compacted before the rest
	// of its events are re-read (a txn's events are written together, so
	// only a crash between two of them loses the rest).
	seen, skip := l.pos.after, l.pos.skip
	if skip > 0 {
		seen++
	}
	for ev := range events {
		if ev.Type == coordinator.EventResync {
			if seen+1 < ev.Revision {
				if err := l.gap(seen+1, ev.Revision, log); err != nil {
					return err
				}
			}
			seen, skip = ev.Revision-1, 0
			continue
		}
		seen = ev.Revision
		if !recorded(ev.Type) || (len(include) > 0 && !include[ev.Pool]) {
			continue
		}
		if skip > 0 && ev.Revision == l.pos.after+1 { // written before a restart
			skip--
			continue
		}
		if err := l.write(Record{Event: ev}); err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) gap(from, resume int64, log *slog.Logger) error {
	note := fmt.Sprintf("etcd compacted revisions %d..%d before the audit log read them; their events are missing", from, resume-1)
	log.Warn("audit log missed events", "from", from, "to", resume-1, "reason", "compacted")
	return l.write(Record{Event: coordinator.Event{Type: TypeGap, Seat: -1, Revision: resume, Time: time.Now().UTC()},
		MissingFrom: from, MissingTo: resume - 1, Note: note})
}

// write writes r as one line in one write call.
func (l *Log) write(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if _, err := l.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("audit log %s: %w", l.name, err)
	}
	return nil
}
