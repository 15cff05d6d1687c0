package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/etcdpool/etcdpool/coordinator"
)

// PoolCollector reads pool and instance state from etcd on every scrape:
// etcdpool_pool_capacity, etcdpool_pool_held, etcdpool_pool_waiting,
// etcdpool_pool_oldest_waiter_seconds, etcdpool_instances{state} and
// etcdpool_etcd_up. A scrape costs one range read of all pools plus two per
// included pool (its instances, its queue).
type PoolCollector struct {
	co      *coordinator.Coordinator
	include map[string]bool // nil: every pool
	timeout time.Duration

	capacity, held, waiting, oldest, instances, up *prometheus.Desc
}

// NewPoolCollector returns a collector for pools, or for every pool when
// pools is empty. timeout bounds the reads of one scrape.
func NewPoolCollector(co *coordinator.Coordinator, pools []string, timeout time.Duration) *PoolCollector {
	var include map[string]bool
	if len(pools) > 0 {
		include = map[string]bool{}
		for _, p := range pools {
			include[p] = true
		}
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	return &PoolCollector{
		co: co, include: include, timeout: timeout,
		capacity: d("pool_capacity", "Seats the pool may hold at once.", "pool"),
		held:     d("pool_held", "Seats held now.", "pool"),
		waiting:  d("pool_waiting", "Claimants waiting for a seat: in the queue, and held back by their own tenant limit or instance selector.", "pool"),
		oldest: d("pool_oldest_waiter_seconds",
			"How long the longest-waiting queued claimant has waited (since its queue entry was written); 0 with nobody queued.", "pool"),
		instances: d("instances", "Registered instances by state: ready or draining.", "pool", "state"),
		up:        d("etcd_up", "1 when the last scrape could read pool state from etcd."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.capacity, c.held, c.waiting, c.oldest, c.instances, c.up} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	pools, err := c.co.ListPools(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	up := 1.0
	for _, p := range pools {
		if c.include != nil && !c.include[p.Name] {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(p.Spec.Capacity), p.Name)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(p.Held), p.Name)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(p.Waiting), p.Name)
		if err := c.collectInstances(ctx, ch, p.Name); err != nil {
			up = 0
		}
		if err := c.collectQueue(ctx, ch, p.Name); err != nil {
			up = 0
		}
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

func (c *PoolCollector) collectInstances(ctx context.Context, ch chan<- prometheus.Metric, pool string) error {
	ins, err := c.co.Instances(ctx, pool)
	if err != nil {
		return err
	}
	counts := map[coordinator.InstanceState]int{coordinator.InstanceReady: 0, coordinator.InstanceDraining: 0}
	for _, in := range ins {
		counts[in.State]++
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.instances, prometheus.GaugeValue, float64(n), pool, string(state))
	}
	return nil
}

func (c *PoolCollector) collectQueue(ctx context.Context, ch chan<- prometheus.Metric, pool string) error {
	q, err := c.co.Queue(ctx, pool)
	if err != nil {
		return err
	}
	var oldest time.Duration
	for _, w := range q {
		oldest = max(oldest, time.Since(w.Since))
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds(), pool)
	return nil
}
