package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/etcdpool/etcdpool/agent"
	"github.com/etcdpool/etcdpool/config"
	"github.com/etcdpool/etcdpool/coordinator"
)

func TestExitCode(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"runtime", errors.New("etcd unreachable"), ExitError},
		{"config", fmt.Errorf("load: %w", &config.FieldError{Field: "agent.ttl", Msg: "too short"}), ExitUsage},
		{"usage", usageError{errors.New("unknown flag")}, ExitUsage},
		{"seat lost", fmt.Errorf("%w: %w", agent.ErrSeatLost, coordinator.ErrForceReleased), ExitSeatLost},
		{"wait timeout", agent.ErrWaitTimeout, ExitError},
	}
	for _, tc := range cases {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("%s: ExitCode(%v) = %d, want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

func execute(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Execute(context.Background(), args, Streams{Out: &out, Err: &errb, LookupEnv: func(string) (string, bool) { return "", false }})
	return code, out.String(), errb.String()
}

func TestExecuteInProcess(t *testing.T) {
	if code, out, _ := execute("sidecar", "--help"); code != ExitOK || !strings.Contains(out, "ETCDPOOL_SEAT_FILE") {
		t.Errorf("sidecar --help: code %d, output lacks the env names:\n%s", code, out)
	}
	if code, _, errs := execute("serve", "extra"); code != ExitUsage || !strings.Contains(errs, "takes no arguments") {
		t.Errorf("serve extra: code %d, stderr %s", code, errs)
	}
	if code, _, errs := execute("sidecar", "--pool", "p", "--ttl", "1s"); code != ExitUsage || !strings.Contains(errs, "sidecar.ttl") {
		t.Errorf("sidecar --ttl 1s: code %d, stderr %s", code, errs)
	}
	if code, _, errs := execute("dev", "--capacity", "0", "--data-dir", t.TempDir()); code != ExitUsage || !strings.Contains(errs, "agent.pools[0].capacity") {
		t.Errorf("dev --capacity 0: code %d, stderr %s", code, errs)
	}
}
