package main

import (
	"runtime/debug"
	"strings"
)

// version and commit are stamped into release builds by the linker
// (-X main.version=1.2.3 -X main.commit=abc1234, see .goreleaser.yaml) and
// are empty otherwise. They are the one exception to "no package-level
// mutable state": -X can only set package-level string variables, and
// nothing assigns them at run time.
var version, commit string

// versionInfo is what the binary knows about where it came from.
type versionInfo struct {
	// Version is the release, without a leading "v", or "dev".
	Version string
	// Commit is the source revision, "" when unknown.
	Commit string
	// Modified reports uncommitted changes in the tree Commit names.
	Modified bool
}

// readVersion decides the version from what the linker stamped and what the
// go command recorded in the binary (info may be nil): a stamp wins, then
// the module version (go install ...@v1.2.3 records it, and so does go
// build in a tagged checkout), then "dev"; the commit is the stamped one,
// else the VCS revision that go build records in a checkout.
func readVersion(stampedVersion, stampedCommit string, info *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: strings.TrimPrefix(stampedVersion, "v"), Commit: stampedCommit}
	if info == nil {
		info = &debug.BuildInfo{}
	}
	if v.Version == "" {
		v.Version = "dev"
		if mv := info.Main.Version; mv != "" && mv != "(devel)" {
			v.Version = strings.TrimPrefix(mv, "v")
		}
	}
	if v.Commit == "" {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
		if v.Commit == "" {
			v.Modified = false
		}
	}
	return v
}

// text is the output of --version: "mcp-run-python VERSION" on the first
// line, which scripts read, and the commit on a second one when known.
func (v versionInfo) text() string {
	s := "mcp-run-python " + v.Version + "\n"
	if v.Commit != "" {
		s += "commit " + v.Commit
		if v.Modified {
			s += " (modified)"
		}
		s += "\n"
	}
	return s
}

// binaryVersion reads the version of the running binary.
func binaryVersion() versionInfo {
	info, _ := debug.ReadBuildInfo() // nil when the binary has none
	return readVersion(version, commit, info)
}

// buildVersion returns the version the binary reports, to MCP clients as
// serverInfo.version too: the stamped release, else the module version,
// else "dev".
func buildVersion() string {
	return binaryVersion().Version
}
