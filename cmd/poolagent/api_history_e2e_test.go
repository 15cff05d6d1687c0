package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdpool/etcdpool/coordinator"
)

// checkNoOverGrant replays etcd's history of a pool's seat keys from
// revision from (when nothing was held) to now, and fails if, at any
// revision, more seats were held than capacity or more by one tenant than
// tenantLimit.
func checkNoOverGrant(t *testing.T, cli *clientv3.Client, root, pool string, from int64, capacity, tenantLimit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := coordinator.SegPrefix(root, pool, coordinator.SegSeats)
	now, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	held, perTenant := map[string]string{}, map[string]int{}
	maxHeld, revs := 0, 0
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(from+1), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	// Revisions after the last seat change bring no event: a progress
	// notification says when the watch has caught up with now.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(300 * time.Millisecond):
				_ = cli.RequestProgress(ctx)
			}
		}
	}()
	for last := from; last < now.Header.Revision; {
		wr, ok := <-wch
		if !ok || wr.Err() != nil {
			t.Fatalf("history watch ended at revision %d: %v", last, wr.Err())
		}
		if wr.Header.Revision > last && len(wr.Events) == 0 {
			last = wr.Header.Revision
		}
		for i, ev := range wr.Events {
			key := string(ev.Kv.Key)
			if ev.Type == clientv3.EventTypePut && ev.IsCreate() {
				tenant := tenantOf(ev.Kv.Value)
				held[key] = tenant
				perTenant[tenant]++
				if tenant != "" && perTenant[tenant] > tenantLimit {
					t.Errorf("revision %d: tenant %q holds %d seats, limit %d", ev.Kv.ModRevision, tenant, perTenant[tenant], tenantLimit)
				}
			} else if ev.Type == clientv3.EventTypeDelete {
				if tenant, ok := held[key]; ok {
					delete(held, key)
					perTenant[tenant]--
				}
			}
			// Check once all events of a revision are applied.
			if i == len(wr.Events)-1 || wr.Events[i+1].Kv.ModRevision != ev.Kv.ModRevision {
				revs++
				if len(held) > capacity {
					t.Errorf("revision %d: %d seats held, capacity %d", ev.Kv.ModRevision, len(held), capacity)
				}
				maxHeld = max(maxHeld, len(held))
				last = ev.Kv.ModRevision
			}
		}
	}
	t.Logf("history: %d revisions changed seats; at most %d of %d held", revs, maxHeld, capacity)
}

func tenantOf(v []byte) string {
	var rec struct{ Tenant string }
	if json.Unmarshal(v, &rec) != nil {
		return "?"
	}
	return rec.Tenant
}
