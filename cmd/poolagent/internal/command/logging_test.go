package command

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/etcdpool/etcdpool/config"
)

// TestJSONLogDurations checks that JSON logs write durations as strings,
// at the top level and inside groups, and leave other values alone.
func TestJSONLogDurations(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(config.Log{Level: "info", Format: "json"}, &buf)
	log.Info("x", "ttl", 1500*time.Millisecond, "n", 3, "g", map[string]int{"a": 1})
	log.WithGroup("grp").Info("y", "wait", 2*time.Minute)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines:\n%s", len(lines), buf.String())
	}
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first["ttl"] != "1.5s" || first["n"] != float64(3) {
		t.Errorf("ttl = %#v, n = %#v; want \"1.5s\" and 3", first["ttl"], first["n"])
	}
	if g, _ := second["grp"].(map[string]any); g == nil || g["wait"] != "2m0s" {
		t.Errorf("grouped wait = %#v, want \"2m0s\"", second["grp"])
	}
}
