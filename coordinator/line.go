package coordinator

import (
	"bytes"
	"cmp"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The line: a state's queue keys in arrival order, by create revision (and
// by key for keys of one revision, which no waiter of ours writes). It is
// kept beside the queue map by put and del, so that a release's hand-off,
// the head's batch and a waiter's place in line cost O(log waiters) to
// find, not a sort of the whole queue on each change: with 500 waiters a
// hand-off's plan took 60 µs, against 8 µs with one.

// arrival orders queue keys as the line holds them.
func arrival(a, b *mvccpb.KeyValue) int {
	if c := cmp.Compare(a.CreateRevision, b.CreateRevision); c != 0 {
		return c
	}
	return bytes.Compare(a.Key, b.Key)
}

// lineAdd puts kv, a queue key now in s.queue, in line; old, if not nil,
// is the entry it replaces.
func (s *poolState) lineAdd(kv, old *mvccpb.KeyValue) {
	if old != nil {
		s.lineDrop(old)
	}
	i, _ := slices.BinarySearchFunc(s.line, kv, arrival)
	s.line = slices.Insert(s.line, i, kv)
}

// lineDrop takes kv, an entry of the line, out of it.
func (s *poolState) lineDrop(kv *mvccpb.KeyValue) {
	if i, ok := slices.BinarySearchFunc(s.line, kv, arrival); ok {
		s.line = slices.Delete(s.line, i, i+1)
	}
}

// waiters returns the queue in arrival order: a copy, which the caller
// may keep while it changes the state.
func (s *poolState) waiters() []*mvccpb.KeyValue { return slices.Clone(s.line) }

// arrivedBefore returns how many queued waiters arrived before revision rev.
func (s *poolState) arrivedBefore(rev int64) int {
	i, _ := slices.BinarySearchFunc(s.line, rev, func(kv *mvccpb.KeyValue, rev int64) int {
		return cmp.Compare(kv.CreateRevision, rev)
	})
	return i
}

// ahead returns the queue key created last before rev, or nil.
func (s *poolState) ahead(rev int64) *mvccpb.KeyValue {
	if i := s.arrivedBefore(rev); i > 0 {
		return s.line[i-1]
	}
	return nil
}

// countAhead counts the queued waiters that arrived before revision rev.
func (s *poolState) countAhead(rev int64) int { return s.arrivedBefore(rev) }
