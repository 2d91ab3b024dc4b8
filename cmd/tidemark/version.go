package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/policy"
	"github.com/tidemark/tidemark/web"
)

// versionInfo describes this build: tidemark --version and tidemark version.
func versionInfo() string {
	return formatVersion(debug.ReadBuildInfo())
}

// build is what the Go toolchain recorded of this build.
type build struct {
	version, revision, at, goVersion string
	modified                         bool
}

// readBuild reads the build info bi (ok false: none).
func readBuild(bi *debug.BuildInfo, ok bool) build {
	b := build{version: "(devel)", goVersion: runtime.Version()}
	if !ok {
		return b
	}
	if bi.Main.Version != "" {
		b.version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		b.goVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.time":
			b.at = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// shownRevision is the revision, marked " (modified)" when the build had
// uncommitted changes ("" when unknown).
func (b build) shownRevision() string {
	if b.revision != "" && b.modified {
		return b.revision + " (modified)"
	}
	return b.revision
}

// webBuild is this build as /metrics shows it (tidemark_build_info).
func webBuild() web.Build {
	b := readBuild(debug.ReadBuildInfo())
	return web.Build{Version: b.version, Revision: b.shownRevision(), GoVersion: b.goVersion}
}

// formatVersion is versionInfo for the build info bi (ok false: none).
func formatVersion(bi *debug.BuildInfo, ok bool) string {
	bd := readBuild(bi, ok)
	var b strings.Builder
	fmt.Fprintf(&b, "tidemark %s\n", bd.version)
	if r := bd.shownRevision(); r != "" {
		fmt.Fprintf(&b, "revision: %s\n", r)
	}
	if bd.at != "" {
		fmt.Fprintf(&b, "built from a commit of: %s\n", bd.at)
	}
	fmt.Fprintf(&b, "go: %s\n", bd.goVersion)
	fmt.Fprintf(&b, "event policy version: %d\n", policy.Version)
	return b.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision, Go version and event policy version of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionInfo())
			return err
		},
	}
}
