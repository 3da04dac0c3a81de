package supervisor

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/bridge"
)

// TestOutputMarker checks the last line of cut output: it says how much more
// was printed than the limit, which is less than what was dropped when whole
// lines below the limit were dropped with the one that crossed it.
func TestOutputMarker(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name    string
		limit   int
		lines   []string
		dropped int // by the worker
		want    string
	}{
		{name: "within the limit", limit: 100, lines: []string{"a", "b"}},
		{name: "many lines", limit: 100, lines: slices.Repeat([]string{strings.Repeat("x", 9)}, 100),
			want: "[output truncated: 900 B more was printed than the 100 B limit]"},
		{name: "one line over the limit", limit: mib, lines: []string{strings.Repeat("x", 2*mib)},
			want: "[output truncated: 1.0 MiB more was printed than the 1.0 MiB limit]"},
		{name: "a kept line, then one over the limit", limit: 100, lines: []string{strings.Repeat("a", 59), strings.Repeat("b", 199)},
			want: "[output truncated: 160 B more was printed than the 100 B limit]"},
		{name: "cut by the worker", limit: mib, dropped: 2*mib + 1,
			want: "[output truncated: 1.0 MiB more was printed than the 1.0 MiB limit]"},
		{name: "a forged count", limit: mib, dropped: 5,
			want: "[output truncated: 5 B more was printed than the 1.0 MiB limit]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := output{limit: tt.limit}
			o.add(bridge.Stdout, tt.lines, tt.dropped)
			got := o.finish()
			last := ""
			if len(got) > 0 {
				last = got[len(got)-1]
			}
			if tt.want == "" {
				if len(got) != len(tt.lines) {
					t.Errorf("got %d lines, want all %d", len(got), len(tt.lines))
				}
				return
			}
			if last != tt.want {
				t.Errorf("marker %q, want %q", last, tt.want)
			}
		})
	}
}
