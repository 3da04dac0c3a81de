package main

import "github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/buildinfo"

// version and commit are stamped into release builds by the linker
// (-X main.version=1.2.3 -X main.commit=abc1234, see .goreleaser.yaml) and
// are empty otherwise. They are the one exception to "no package-level
// mutable state": -X can only set package-level string variables, and
// nothing assigns them at run time.
var version, commit string

// binaryVersion reads the version of the running binary.
func binaryVersion() buildinfo.Info {
	return buildinfo.Binary(version, commit)
}
