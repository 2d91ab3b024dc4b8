package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tidemark/tidemark/policy"
)

// versionInfo describes this build: tidemark --version and tidemark version.
func versionInfo() string {
	return formatVersion(debug.ReadBuildInfo())
}

// formatVersion is versionInfo for the build info bi (ok false: none).
func formatVersion(bi *debug.BuildInfo, ok bool) string {
	version, revision, at, modified := "(devel)", "", "", false
	goVersion := runtime.Version()
	if ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tidemark %s\n", version)
	if revision != "" {
		if modified {
			revision += " (modified)"
		}
		fmt.Fprintf(&b, "revision: %s\n", revision)
	}
	if at != "" {
		fmt.Fprintf(&b, "built from a commit of: %s\n", at)
	}
	fmt.Fprintf(&b, "go: %s\n", goVersion)
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
