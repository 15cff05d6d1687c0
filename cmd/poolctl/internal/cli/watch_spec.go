package cli

import (
	"maps"
	"slices"
	"strings"

	"github.com/etcdpool/etcdpool/coordinator"
)

// specChanges lists what changed from spec a to spec b, field by field, in
// the words of pool set (specDiff): TestSpecChangesReadLikePoolSet keeps
// the two in step.
func specChanges(a, b coordinator.PoolSpec) []specChangeView {
	out := []specChangeView{}
	add := func(field, x, y string) {
		if x != y {
			out = append(out, specChangeView{Field: field, Old: x, New: y})
		}
	}
	add("capacity", itoa(a.Capacity), itoa(b.Capacity))
	add("seatTTL", a.SeatTTL().String(), b.SeatTTL().String())
	add("tenantLimit", limitCell(a.TenantLimit), limitCell(b.TenantLimit))
	for _, t := range slices.Sorted(maps.Keys(mergeKeys(a.TenantLimits, b.TenantLimits))) {
		x, okx := a.TenantLimits[t]
		y, oky := b.TenantLimits[t]
		add("tenantLimits."+t, overrideCell(x, okx), overrideCell(y, oky))
	}
	add("requireInstance", yesNo(a.RequireInstance), yesNo(b.RequireInstance))
	return out
}

// specChangeLabels names the fields as pool set's message does.
var specChangeLabels = map[string]string{
	"capacity": "capacity", "seatTTL": "seat TTL", "tenantLimit": "tenant limit", "requireInstance": "require instance",
}

// specChangesText renders changes as "capacity 2 -> 4, tenant ci limit
// 2 -> 3"; "no change" when a spec was rewritten as it was.
func specChangesText(cs []specChangeView) string {
	if len(cs) == 0 {
		return "no change"
	}
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		label, ok := specChangeLabels[c.Field]
		if !ok {
			label = "tenant " + strings.TrimPrefix(c.Field, "tenantLimits.") + " limit"
		}
		parts = append(parts, label+" "+c.Old+" -> "+c.New)
	}
	return strings.Join(parts, ", ")
}
