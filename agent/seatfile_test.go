package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestSeatFileWritesJSONAndEnvAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared")
	f := SeatFile{JSONPath: filepath.Join(dir, "seat.json"), EnvPath: filepath.Join(dir, "seat.env")}
	rec := SeatRecord{State: StateHeld, Pool: "p", Seat: 3, Token: 42, Instance: "i1", Address: "10.0.0.1:80",
		Labels: map[string]string{"zone": "a", "gpu": "h100"}, Holder: "ns/it's-me"}
	for range 3 { // rewrites replace the files
		if err := f.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadSeatFile(f.JSONPath)
	if err != nil {
		t.Fatal(err)
	}
	if got.Token != 42 || got.Seat != 3 || got.Address != rec.Address || got.Labels["gpu"] != "h100" {
		t.Errorf("read back %+v", got)
	}
	env, err := os.ReadFile(f.EnvPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"ETCDPOOL_SEAT_STATE='held'", "ETCDPOOL_SEAT_NUMBER='3'", "ETCDPOOL_SEAT_TOKEN='42'",
		"ETCDPOOL_SEAT_LABELS='gpu=h100,zone=a'", `ETCDPOOL_SEAT_HOLDER='ns/it'\''s-me'`,
	} {
		if !strings.Contains(string(env), line+"\n") {
			t.Errorf("env file lacks %s:\n%s", line, env)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temp files left behind: %v", entries)
	}
}

// TestShellQuoteRoundTrip sources quoted values with /bin/sh and checks
// that the shell reads back what was written (newlines become spaces).
func TestShellQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "it's", "a b", "$HOME", `back\slash`, "'", "`id`", "new\nline"} {
		out, err := exec.Command("/bin/sh", "-c", "X="+shellQuote(s)+"; printf %s \"$X\"").Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if want := strings.ReplaceAll(s, "\n", " "); string(out) != want {
			t.Errorf("sourced %q, got %q", want, out)
		}
	}
}

// TestWriteFileAtomicModes: a new file gets the mode asked for less the
// umask; a rewrite never widens the mode the file already had.
func TestWriteFileAtomicModes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		umask    int
		existing os.FileMode // 0: no file before
		perm     os.FileMode
		want     os.FileMode
	}{
		{"state, umask 022", 0o022, 0, stateFileMode, 0o600},
		{"state, umask 077", 0o077, 0, stateFileMode, 0o600},
		{"state over a group-readable file", 0o022, 0o640, stateFileMode, 0o600},
		{"seat, umask 022", 0o022, 0, seatFileMode, 0o644},
		{"seat, umask 027", 0o027, 0, seatFileMode, 0o640},
		{"seat over a narrowed file", 0o022, 0o600, seatFileMode, 0o600},
		{"seat over a read-only file", 0o000, 0o444, seatFileMode, 0o444},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if tc.existing != 0 {
				if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tc.existing); err != nil {
					t.Fatal(err)
				}
			}
			old := syscall.Umask(tc.umask)
			err := WriteFileAtomic(path, []byte("new"), tc.perm)
			syscall.Umask(old)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.want {
				t.Errorf("mode %o, want %o", got, tc.want)
			}
			if b, _ := os.ReadFile(path); string(b) != "new" {
				t.Errorf("content %q", b)
			}
		})
	}
}
