package coordinator

import "testing"

// TestConstraintClassNamesEachSelector: claims whose selectors differ are
// never one class (heldback.go), however their labels are spelled; a class
// shared by mistake made a claim wait behind a held-back one whose
// instances are full while its own had a free seat.
func TestConstraintClassNamesEachSelector(t *testing.T) {
	distinct := []claimOptions{
		{},
		{tenant: "a"},
		{instance: "a"},
		{labels: map[string]string{"a": "b=c"}},
		{labels: map[string]string{"a=b": "c"}},
		{labels: map[string]string{"a": "b", "c": "d"}},
		{labels: map[string]string{"a": "b\x00c=d"}},
		{tenant: "a", labels: map[string]string{"a": "b"}},
	}
	seen := map[string]int{}
	for i, o := range distinct {
		c := constraintClass(o)
		if j, ok := seen[c]; ok {
			t.Fatalf("options %d and %d share class %q", j, i, c)
		}
		seen[c] = i
	}
	same := claimOptions{labels: map[string]string{"c": "d", "a": "b"}}
	if constraintClass(same) != constraintClass(distinct[5]) {
		t.Fatal("the same labels in another order are another class")
	}
}
