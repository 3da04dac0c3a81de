package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestFlagsDocCurrent fails when docs/FLAGS.md is not what `make docs`
// makes of today's flag set and template: a flag added, removed or
// reworded without regenerating the reference, or the file edited by hand.
func TestFlagsDocCurrent(t *testing.T) {
	want, err := FlagReference()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "FLAGS.md"))
	if err != nil {
		t.Fatalf("%v: run `make docs` to generate it", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/FLAGS.md is stale: run `make docs` and commit the result (edit flags.md.tmpl or the flags' usage, not FLAGS.md); first difference at line %d", firstDiffLine(got, want))
	}
}

// firstDiffLine is the 1-based line of a and b where they first differ.
func firstDiffLine(a, b []byte) int {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

func TestFlagTables(t *testing.T) {
	newSet := func() *pflag.FlagSet {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		fs.Int("workers", 2, "live workers")
		fs.String("warm", "0", "idle workers (default: --workers)")
		fs.BoolP("help", "h", false, "print this help | exit")
		fs.String("mount", "", "show host folder `HOST:SANDBOX[:ro|rw]`")
		return fs
	}
	tests := []struct {
		name    string
		groups  []flagGroup
		want    string // the tables, or a part of the error
		wantErr bool
	}{
		{
			name:   "every flag once",
			groups: []flagGroup{{"Pool", []string{"workers", "warm"}}, {"Other", []string{"help", "mount"}}},
			want: "## Pool\n\n| flag | default | meaning |\n| --- | --- | --- |\n" +
				"| `--workers int` | `2` | live workers |\n" +
				"| `--warm string` | --workers | idle workers |\n\n" +
				"## Other\n\n| flag | default | meaning |\n| --- | --- | --- |\n" +
				"| `-h`, `--help` |  | print this help \\| exit |\n" +
				"| `--mount HOST:SANDBOX[:ro\\|rw]` |  | show host folder HOST:SANDBOX[:ro\\|rw] |\n",
		},
		{name: "a flag in no group", groups: []flagGroup{{"Pool", []string{"workers", "warm", "mount"}}}, want: "--help", wantErr: true},
		{name: "a name that is no flag", groups: []flagGroup{{"Pool", []string{"workers", "warm", "help", "mount", "wokers"}}}, want: "--wokers, which is no flag", wantErr: true},
		{name: "a flag twice", groups: []flagGroup{{"Pool", []string{"workers", "warm", "help", "mount"}}, {"Again", []string{"warm"}}}, want: "more than one group", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := flagTables(newSet(), tt.groups)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("flagTables() = %q, %v; want an error with %q", got, err, tt.want)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("flagTables() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
