package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestReadVersion(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		info.Settings = []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}}
		if modified != "" {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: "vcs.modified", Value: modified})
		}
		return info
	}
	module := func(v string) *debug.BuildInfo { return &debug.BuildInfo{Main: debug.Module{Version: v}} }
	tests := []struct {
		name            string
		version, commit string // stamped
		info            *debug.BuildInfo
		want            Info
		text            string
	}{
		{"no build info", "", "", nil, Info{Version: "dev"}, "mcp-run-python dev\n"},
		{"go run or go build without VCS", "", "", module("(devel)"), Info{Version: "dev"}, "mcp-run-python dev\n"},
		{"go install @v1.2.3", "", "", module("v1.2.3"), Info{Version: "1.2.3"}, "mcp-run-python 1.2.3\n"},
		{"release stamp", "1.4.0", "abc1234", module("(devel)"), Info{Version: "1.4.0", Commit: "abc1234"},
			"mcp-run-python 1.4.0\ncommit abc1234\n"},
		{"stamp with a v", "v1.4.0", "", nil, Info{Version: "1.4.0"}, "mcp-run-python 1.4.0\n"},
		{"stamp wins over the build info", "1.4.0", "abc1234", vcs("ffffffffffff", "true"),
			Info{Version: "1.4.0", Commit: "abc1234"}, "mcp-run-python 1.4.0\ncommit abc1234\n"},
		{"checkout", "", "", vcs("0123456789abcdef", "false"), Info{Version: "dev", Commit: "0123456789abcdef"},
			"mcp-run-python dev\ncommit 0123456789abcdef\n"},
		{"modified checkout", "", "", vcs("0123456789abcdef", "true"),
			Info{Version: "dev", Commit: "0123456789abcdef", Modified: true},
			"mcp-run-python dev\ncommit 0123456789abcdef (modified)\n"},
		{"modified without a revision", "", "", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}},
			Info{Version: "dev"}, "mcp-run-python dev\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Read(tt.version, tt.commit, tt.info)
			if got != tt.want {
				t.Errorf("Read = %+v, want %+v", got, tt.want)
			}
			if text := got.Text(); text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
		})
	}
}
