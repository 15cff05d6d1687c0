package audit

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestResumePoint(t *testing.T) {
	rec := func(rev int, typ string) string {
		return `{"type":"` + typ + `","seat":0,"revision":` + strconv.Itoa(rev) + "}\n"
	}
	cases := []struct {
		name    string
		content string
		want    position
		partial bool
	}{
		{"empty", "", position{}, false},
		{"one record", rec(7, "seat-claimed"), position{after: 6, skip: 1}, false},
		{"three of one revision", rec(5, "x") + rec(9, "a") + rec(9, "b") + rec(9, "c"), position{after: 8, skip: 3}, false},
		{"torn last line", rec(5, "x") + rec(9, "a") + `{"type":"seat-cl`, position{after: 8, skip: 1}, true},
		{"gap last", rec(5, "x") + rec(20, "gap"), position{after: 19}, false},
		{"garbage only", "not json\n", position{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.jsonl")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, partial, err := resumePoint(f)
			if err != nil || got != tc.want || partial != tc.partial {
				t.Errorf("resumePoint = %+v, partial %v, err %v; want %+v, partial %v", got, partial, err, tc.want, tc.partial)
			}
		})
	}
}
