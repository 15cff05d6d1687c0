package agent

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff yields growing, jittered delays between retries, so that agents
// restarted together do not retry in step.
type backoff struct {
	cur, min, max time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{cur: min, min: min, max: max} }

// next returns a delay in [cur/2, cur) and doubles cur up to max.
func (b *backoff) next() time.Duration {
	d := b.cur/2 + rand.N(b.cur/2+1)
	b.cur = min(2*b.cur, b.max)
	return d
}

func (b *backoff) reset() { b.cur = b.min }

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
