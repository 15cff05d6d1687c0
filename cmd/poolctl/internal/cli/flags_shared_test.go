package cli

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/etcdpool/etcdpool/config"
)

// TestConnectionFlagsMatchPoolagent keeps one set of connection flags and
// variables for both binaries: every poolctl connection flag exists in
// poolagent serve and sidecar under the same name and variable, and every
// poolagent flag that sets etcd or the prefix exists in poolctl.
func TestConnectionFlagsMatchPoolagent(t *testing.T) {
	root := newRootCommand(newInvocation().env, nil)
	ours := root.PersistentFlags()
	for _, mode := range []config.Mode{config.ModeServe, config.ModeSidecar} {
		theirs := pflag.NewFlagSet("poolagent", pflag.ContinueOnError)
		config.BindFlags(theirs, mode)
		for _, name := range envFlags {
			if theirs.Lookup(name) == nil {
				t.Errorf("mode %d: poolagent has no --%s", mode, name)
			}
			if envName(name) != config.EnvName(name) {
				t.Errorf("--%s: poolctl reads %s, poolagent %s", name, envName(name), config.EnvName(name))
			}
		}
		for _, name := range []string{"endpoints", "dial-timeout", "user", "password-file", "cert", "key", "cacert", "server-name", "prefix"} {
			if theirs.Lookup(name) == nil || ours.Lookup(name) == nil {
				t.Errorf("mode %d: --%s missing from poolagent (%v) or poolctl (%v)", mode, name, theirs.Lookup(name) != nil, ours.Lookup(name) != nil)
			}
		}
		if theirs.Lookup("password") != nil || ours.Lookup("password") != nil {
			t.Errorf("a --password flag exists: passwords must not need argv")
		}
	}
}
