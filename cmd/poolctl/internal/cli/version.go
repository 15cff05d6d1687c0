package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X github.com/etcdpool/etcdpool/cmd/poolctl/internal/cli.version=v1.2.3".
// Without it the module version from the build info is used.
var version = ""

// versionOptions is version.
type versionOptions struct{ g *globalOptions }

func newVersionCommand(g *globalOptions) *cobra.Command {
	o := &versionOptions{g: g}
	return &cobra.Command{
		Use:   "version",
		Short: "Print poolctl's version",
		Args:  exactArgs(),
		RunE:  runE(o),
	}
}

// Complete implements command.
func (o *versionOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate implements command.
func (o *versionOptions) Validate() error { return nil }

// Run implements command.
func (o *versionOptions) Run(context.Context) error {
	v := versionView{Version: buildVersion(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	return o.g.printer().Print(Result{Data: v, Text: fmt.Sprintf("poolctl %s (%s, %s)", v.Version, v.GoVersion, v.Platform)})
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
