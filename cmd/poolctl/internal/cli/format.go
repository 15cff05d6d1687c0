package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// age renders a duration the way kubectl does: two units at most.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return trimZero(fmt.Sprintf("%dm%ds", s/60, s%60))
	case s < 86400:
		return trimZero(fmt.Sprintf("%dh%dm", s/3600, (s%3600)/60))
	}
	return trimZero(fmt.Sprintf("%dd%dh", s/86400, (s%86400)/3600))
}

func trimZero(s string) string {
	for _, z := range []string{"0s", "0m", "0h"} {
		if strings.HasSuffix(s, z) && len(s) > len(z) && s[len(s)-len(z)-1] >= 'a' {
			return strings.TrimSuffix(s, z)
		}
	}
	return s
}

// seconds renders a duration in whole seconds, -1 if unknown.
func seconds(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return int64(d / time.Second)
}

// elapsed is whole seconds from t to now; 0 if t is ahead (clock skew).
func elapsed(now, t time.Time) int64 { return int64(max(now.Sub(t), 0) / time.Second) }

// ttlCell renders a lease TTL left.
func ttlCell(d time.Duration) string {
	if d < 0 {
		return "?"
	}
	return fmt.Sprintf("%ds", int64(d/time.Second))
}

// dash renders an empty cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// leaseHex renders a lease ID the way etcdctl does.
func leaseHex(id clientv3.LeaseID) string { return fmt.Sprintf("%x", int64(id)) }

// kvCell renders a map as sorted k=v pairs.
func kvCell[V any](m map[string]V) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, ",")
}

// nonNil returns m, or an empty map so JSON prints {} rather than null.
func nonNil[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// bar renders utilization as a 10-cell bar and a percentage.
func bar(held, capacity int) string {
	if capacity <= 0 {
		return "-"
	}
	const cells = 10
	full := min(cells, (held*cells+capacity-1)/capacity)
	return fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", full), strings.Repeat(".", cells-full), held*100/capacity)
}
