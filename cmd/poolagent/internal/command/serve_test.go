package command

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestServeTakeoverSources checks where --takeover comes from: the flag
// wins over ETCDPOOL_TAKEOVER, and a value that is not a boolean is a
// usage error naming the variable, reported before anything connects.
func TestServeTakeoverSources(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  string // "" unset
		want bool
	}{
		{"default", nil, "", false},
		{"flag", []string{"--takeover"}, "", true},
		{"env", nil, "true", true},
		{"env off", nil, "0", false},
		{"flag over env", []string{"--takeover=false"}, "true", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := serveOptions(t, tc.env, tc.args...)
			got, err := o.takeover()
			if err != nil || got != tc.want {
				t.Errorf("takeover() = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	var errb bytes.Buffer
	env := func(k string) (string, bool) { return "maybe", k == "ETCDPOOL_TAKEOVER" }
	code := Execute(context.Background(), []string{"serve"}, Streams{Out: &errb, Err: &errb, LookupEnv: env})
	if code != ExitUsage || !strings.Contains(errb.String(), "ETCDPOOL_TAKEOVER") {
		t.Errorf("ETCDPOOL_TAKEOVER=maybe: code %d, output %s", code, errb.String())
	}
}

func serveOptions(t *testing.T, env string, args ...string) *ServeOptions {
	t.Helper()
	lookup := func(k string) (string, bool) { return env, env != "" && k == "ETCDPOOL_TAKEOVER" }
	cmd := NewServeCommand(Streams{LookupEnv: lookup})
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	o := &ServeOptions{streams: Streams{LookupEnv: lookup}, flags: cmd.Flags()}
	o.Takeover, _ = cmd.Flags().GetBool("takeover")
	return o
}
