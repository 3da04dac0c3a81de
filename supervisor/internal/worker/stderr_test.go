package worker

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"
)

// TestStderrLines reads stderr as deno and user code (through `import js`)
// write it: lines of any length, the long ones cut and saying so.
func TestStderrLines(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	cut := func(prefix string, n int) string {
		return fmt.Sprintf("%s… [cut: the line has %d bytes]", prefix, n)
	}
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{name: "empty", in: "", limit: 10, want: nil},
		{name: "lines", in: "a\n\nb\n", limit: 10, want: []string{"a", "", "b"}},
		{name: "no_final_newline", in: "a\nb", limit: 10, want: []string{"a", "b"}},
		{name: "crlf", in: "a\r\nb\r\n", limit: 10, want: []string{"a", "b"}},
		{name: "at_limit", in: "0123456789\n", limit: 10, want: []string{"0123456789"}},
		{name: "over_limit", in: "0123456789A\nb\n", limit: 10, want: []string{cut("0123456789", 11), "b"}},
		// The Scanner this replaces stopped reading at its first line over 64 KiB.
		{name: "100KB_lines", in: long + "\n" + long + "\nafter\n", limit: 1000,
			want: []string{cut(long[:1000], 100_000), cut(long[:1000], 100_000), "after"}},
		{name: "100KB_unended", in: "before\n" + long, limit: 1000, want: []string{"before", cut(long[:1000], 100_000)}},
		// é is two bytes: a cut through it drops its first one.
		{name: "cut_in_a_character", in: "aé" + long + "\n", limit: 2, want: []string{cut("a", 3+len(long))}},
		{name: "cut_after_a_character", in: "aéb\n", limit: 3, want: []string{cut("aé", 4)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Collect(stderrLinesOf(strings.NewReader(tt.in), tt.limit))
			if !slices.Equal(got, tt.want) {
				t.Errorf("lines of %.40q…:\n got %.200q\nwant %.200q", tt.in, got, tt.want)
			}
		})
	}
}

// TestStderrDrained checks that a worker's stderr is read to its end
// whatever its lines, so that deno never blocks writing there: a write to a
// pipe nobody reads is a worker wedged until its call's time limit.
func TestStderrDrained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, wr := io.Pipe()
		written := make(chan error, 1)
		go func() {
			line := strings.Repeat("e", 100_000) + "\n"
			var err error
			for range 20 {
				if _, err = io.WriteString(wr, line); err != nil {
					break
				}
			}
			if err == nil {
				_, err = io.WriteString(wr, "the last line\n")
			}
			wr.Close()
			written <- err
		}()
		w := &Worker{}
		go w.collectStderr(r, zap.NewNop())
		synctest.Wait()
		select {
		case err := <-written:
			if err != nil {
				t.Fatalf("write: %v", err)
			}
		default:
			r.Close() // unblocks the writer, so that the bubble ends
			<-written
			t.Fatal("the writer is blocked: stderr is no longer read")
		}
		tail := w.StderrTail()
		if !strings.HasSuffix(tail, "\nthe last line") {
			t.Errorf("stderr's last line is not kept: %.300q", tail)
		}
		if n := strings.Count(tail, "\n") + 1; n != stderrLines {
			t.Errorf("%d lines kept, want %d", n, stderrLines)
		}
		if len(tail) > stderrLines*(maxStderrLine+100) {
			t.Errorf("%d bytes kept, want at most about %d", len(tail), stderrLines*maxStderrLine)
		}
	})
}

func TestCutText(t *testing.T) {
	tests := []struct {
		name, text string
		limit      int
		want       string
	}{
		{"fits", "abc", 3, "abc"},
		{"ASCII", "abcdef", 4, "abcd"},
		{"before a 2-byte character", "aé", 2, "a"},
		{"before a 3-byte character", "ab日", 4, "ab"},
		{"before a 4-byte character", "a🐍", 4, "a"},
		{"after a 4-byte character", "🐍a", 4, "🐍"},
		{"continuation bytes only", "\x80\x80\x80\x80\x80\x80", 5, "\x80\x80\x80\x80\x80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CutText(tt.text, tt.limit); got != tt.want {
				t.Errorf("CutText(%q, %d) = %q, want %q", tt.text, tt.limit, got, tt.want)
			}
		})
	}
}
