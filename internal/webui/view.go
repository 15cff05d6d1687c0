package webui

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcdpool/etcdpool/coordinator"
)

// PoolView is what the page shows of one pool. Seats, queue and
// instances are the coordinator's own types, so that fields it gains
// (such as why a waiter waits) reach the page without a change here.
type PoolView struct {
	Name      string                 `json:"name"`
	Status    coordinator.PoolStatus `json:"status"`
	Seats     []coordinator.Seat     `json:"seats"`
	Queue     []coordinator.Waiter   `json:"queue"`
	Instances []instanceView         `json:"instances"`
	// Deleted is true when the pool no longer exists.
	Deleted bool `json:"deleted,omitempty"`
	// Error says why the pool could not be read in full.
	Error string `json:"error,omitempty"`
}

// instanceView adds the agent's lease, which Instance does not encode.
type instanceView struct {
	coordinator.Instance
	Lease string `json:"lease"`
}

// Snapshot is every pool the page shows.
type Snapshot struct {
	Pools []PoolView `json:"pools"`
}

// readPool reads one pool's status, seats, queue and instances.
func readPool(ctx context.Context, co *coordinator.Coordinator, name string) PoolView {
	v := PoolView{Name: name, Seats: []coordinator.Seat{}, Queue: []coordinator.Waiter{}, Instances: []instanceView{}}
	st, err := co.PoolStatus(ctx, name)
	if errors.Is(err, coordinator.ErrPoolNotFound) {
		v.Deleted = true
		return v
	}
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Status = st
	var errs []error
	seats, err := co.Seats(ctx, name)
	errs = append(errs, err)
	if err == nil {
		v.Seats = append(v.Seats, seats...)
	}
	queue, err := co.Queue(ctx, name)
	errs = append(errs, err)
	if err == nil {
		v.Queue = append(v.Queue, queue...)
	}
	ins, err := co.Instances(ctx, name)
	errs = append(errs, err)
	for _, in := range ins {
		v.Instances = append(v.Instances, instanceView{Instance: in, Lease: fmt.Sprintf("%x", int64(in.Lease))})
	}
	if err := errors.Join(errs...); err != nil {
		v.Error = err.Error()
	}
	return v
}
