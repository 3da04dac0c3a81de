// Package buildinfo decides the version the binary reports, from what the
// linker stamped into package main and what the go command recorded.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is what the binary knows about where it came from.
type Info struct {
	// Version is the release, without a leading "v", or "dev".
	Version string
	// Commit is the source revision, "" when unknown.
	Commit string
	// Modified reports uncommitted changes in the tree Commit names.
	Modified bool
}

// Read decides the version from what the linker stamped and what the go
// command recorded in the binary (info may be nil): a stamp wins, then the
// module version (go install ...@v1.2.3 records it, and so does go build in
// a tagged checkout), then "dev"; the commit is the stamped one, else the
// VCS revision that go build records in a checkout.
func Read(stampedVersion, stampedCommit string, info *debug.BuildInfo) Info {
	v := Info{Version: strings.TrimPrefix(stampedVersion, "v"), Commit: stampedCommit}
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

// Text is the output of --version: "mcp-run-python VERSION" on the first
// line, which scripts read, and the commit on a second one when known.
func (v Info) Text() string {
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

// Binary reads the version of the running binary, given what the linker
// stamped: the variables it sets must live in package main.
func Binary(stampedVersion, stampedCommit string) Info {
	info, _ := debug.ReadBuildInfo() // nil when the binary has none
	return Read(stampedVersion, stampedCommit, info)
}
