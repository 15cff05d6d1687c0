package coordinator

import (
	"math/rand/v2"
	"testing"
)

// TestFreeSlot checks freeSlot on random sets, whole and probed: a slot it
// returns is free, at or above what the state saw from, and below the
// held count plus slotSpread; not one that a claim in flight chose (busy)
// while another is free; and it finds none only when every slot it may
// choose among is held.
func TestFreeSlot(t *testing.T) {
	for trial := range 20000 {
		limit := 1 + rand.IntN(200)
		held := map[int]int64{}
		for n := range limit + 40 {
			if rand.IntN(100) < 70 {
				held[n] = 1
			}
		}
		count := len(held) // some slots may sit at or above limit, as after a shrink
		if count >= limit {
			continue // takeSlot refuses before freeSlot runs
		}
		from := 0
		if trial%2 == 1 {
			from = rand.IntN(limit + 1)
		}
		busy := map[int]int{}
		for n := range limit {
			if rand.IntN(100) < 50 {
				busy[n] = 1
			}
		}
		set := slotSet{limit: limit, held: held, count: count, from: from, busy: busy}
		window := min(limit, count+slotSpread)
		n, ok := freeSlot(set)
		anyFree, anyIdle := false, false
		for m := from; m < window; m++ {
			if _, taken := held[m]; !taken {
				anyFree = true
				anyIdle = anyIdle || busy[m] == 0
			}
		}
		switch {
		case ok && (n < from || n >= window):
			t.Fatalf("freeSlot(%+v) = %d, outside [%d, %d)", set, n, from, window)
		case ok && held[n] != 0:
			t.Fatalf("freeSlot(%+v) = %d, which is held", set, n)
		case ok != anyFree:
			t.Fatalf("freeSlot(%+v) found %v, but a free slot in [%d, %d) exists: %v", set, ok, from, window, anyFree)
		case ok && anyIdle && busy[n] > 0:
			t.Fatalf("freeSlot(%+v) = %d, which a claim in flight chose, while a free slot nobody chose exists", set, n)
		case from == 0 && !ok:
			t.Fatalf("freeSlot(%+v) found nothing in a whole set holding %d < %d", set, count, limit)
		}
	}
}
