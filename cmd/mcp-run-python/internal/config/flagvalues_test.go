package config

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
)

// valueCase is one input to a flag value: what the value becomes, or the
// error it gives (wantErr is a part of the message).
type valueCase[T any] struct {
	in      string
	want    T
	wantErr string
}

// checkValue sets each case on a fresh value from newValue, which returns
// the value and what it fills in, and checks the result: a refused input
// leaves the value as it was, and an accepted one reads back through String
// as the same value.
func checkValue[T any](t *testing.T, newValue func() (pflag.Value, *T), cases []valueCase[T]) {
	t.Helper()
	for _, tt := range cases {
		v, p := newValue()
		before := *p
		err := v.Set(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Set(%q) error = %v, want one with %q", tt.in, err, tt.wantErr)
			}
			if !reflect.DeepEqual(*p, before) {
				t.Errorf("Set(%q) failed but changed the value from %v to %v", tt.in, before, *p)
			}
			continue
		}
		if err != nil {
			t.Errorf("Set(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(*p, tt.want) {
			t.Errorf("Set(%q) = %#v, want %#v", tt.in, *p, tt.want)
		}
		again, q := newValue()
		if err := again.Set(v.String()); err != nil || !reflect.DeepEqual(*q, *p) {
			t.Errorf("Set(String() = %q) = %#v, %v; want %#v", v.String(), *q, err, *p)
		}
	}
}

func TestFlagIntValues(t *testing.T) {
	t.Run("port", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *int) {
			var n int
			return newIntFlag(&n, 3001, 0, math.MaxUint16), &n
		}, []valueCase[int]{
			{in: "8080", want: 8080},
			{in: "0", want: 0},
			{in: "65535", want: 65535},
			{in: "0x10", want: 16},
			{in: "+80", want: 80},
			{in: "65536", wantErr: "need 0 to 65535"},
			{in: "-1", wantErr: "need 0 to 65535"},
			{in: "99999999999999999999", wantErr: "need 0 to 65535"},
			{in: "abc", wantErr: "not a whole number"},
			{in: "80.5", wantErr: "not a whole number"},
			{in: "", wantErr: "not a whole number"},
			{in: " 80", wantErr: "not a whole number"},
		})
	})
	t.Run("at least one", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *int) {
			var n int
			return newIntFlag(&n, 0, 1, math.MaxInt), &n
		}, []valueCase[int]{
			{in: "1", want: 1},
			{in: strconv.Itoa(math.MaxInt), want: math.MaxInt},
			{in: "0", wantErr: "need at least 1"},
			{in: "-4", wantErr: "need at least 1"},
			{in: "-99999999999999999999", wantErr: "need at least 1"},
			{in: "99999999999999999999", wantErr: "too large"},
			{in: "many", wantErr: "not a whole number"},
		})
	})
	t.Run("not negative", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *int) {
			var n int
			return newIntFlag(&n, 1024, 0, math.MaxInt), &n
		}, []valueCase[int]{
			{in: "0", want: 0},
			{in: "100", want: 100},
			{in: "-1", wantErr: "must not be negative"},
			{in: "1e3", wantErr: "not a whole number"},
		})
	})
}

func TestFlagDurationValues(t *testing.T) {
	t.Run("positive", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *time.Duration) {
			var d time.Duration
			return positiveDuration(&d, time.Minute), &d
		}, []valueCase[time.Duration]{
			{in: "1m30s", want: 90 * time.Second},
			{in: "1ns", want: time.Nanosecond},
			{in: "500ms", want: 500 * time.Millisecond},
			{in: "0s", wantErr: "must be positive"},
			{in: "0", wantErr: "must be positive"},
			{in: "-1s", wantErr: "must be positive"},
			{in: "5", wantErr: "not a duration such as 30s"},
			{in: "soon", wantErr: "not a duration such as 30s"},
			{in: "", wantErr: "not a duration such as 30s"},
		})
	})
	t.Run("not negative", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *time.Duration) {
			var d time.Duration
			return nonNegativeDuration(&d, 30*time.Second), &d
		}, []valueCase[time.Duration]{
			{in: "0", want: 0},
			{in: "0s", want: 0},
			{in: "2h", want: 2 * time.Hour},
			{in: "-1ns", wantErr: "must not be negative"},
			{in: "later", wantErr: "not a duration such as 30s"},
		})
	})
}

func TestFlagByteSize(t *testing.T) {
	t.Run("required", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *int64) {
			var n int64
			return newByteSize(&n, "1MiB", math.MaxInt32), &n
		}, []valueCase[int64]{
			{in: "0", want: 0},
			{in: "64KiB", want: 64 << 10},
			{in: "1MiB", want: 1 << 20},
			{in: "100kB", want: 100000},
			{in: "3GB", wantErr: "too large, at most 2147483647 bytes"},
			{in: "2147483647", want: math.MaxInt32},
			{in: "2147483648", wantErr: "too large"},
			{in: "20EiB", wantErr: "too large, at most 2147483647 bytes"}, // beyond uint64
			{in: "-1KiB", wantErr: "must not be negative"},
			{in: "lots", wantErr: "not a size such as 512MiB"},
			{in: "12 parsecs", wantErr: "not a size such as 512MiB: unhandled size name: parsecs"},
			{in: "", wantErr: "not a size such as 512MiB"},
		})
	})
	t.Run("positive", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *int64) {
			var n int64
			return positiveByteSize(&n, "32MiB", math.MaxInt64), &n
		}, []valueCase[int64]{
			{in: "1", want: 1},
			{in: "32MiB", want: 32 << 20},
			{in: "1TB", want: 1e12},
			{in: "0", wantErr: "must be positive"},
			{in: "0MiB", wantErr: "must be positive"},
			{in: "-0", wantErr: "must not be negative"},
			{in: "-1MiB", wantErr: "must not be negative"},
			{in: "32MiB/s", wantErr: "not a size such as 512MiB"},
			{in: "", wantErr: "not a size such as 512MiB"},
		})
	})
	t.Run("optional", func(t *testing.T) {
		var n int64
		set := true
		f := optionalByteSize(&n, &set, math.MaxInt64)
		if set || f.String() != "" {
			t.Fatalf("a new optional size is set: %v, %q", set, f.String())
		}
		if err := f.Set("16MiB"); err != nil || !set || n != 16<<20 || f.String() != "16MiB" {
			t.Fatalf("Set(16MiB) = %v; set %v, %d, %q", err, set, n, f.String())
		}
		if err := f.Set("-1"); err == nil || !set || n != 16<<20 {
			t.Fatalf("Set(-1) = %v; set %v, %d", err, set, n)
		}
		if err := f.Set(""); err != nil || set || n != 0 || f.String() != "" {
			t.Fatalf(`Set("") = %v; set %v, %d, %q`, err, set, n, f.String())
		}
	})
	t.Run("bad default", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("newByteSize took a wrong default")
			}
		}()
		var n int64
		newByteSize(&n, "lots", math.MaxInt64)
	})
}

func TestFlagChoice(t *testing.T) {
	checkValue(t, func() (pflag.Value, *ReturnMode) {
		var m ReturnMode
		return newChoice(&m, ReturnXML, ReturnXML, ReturnJSON), &m
	}, []valueCase[ReturnMode]{
		{in: "json", want: ReturnJSON},
		{in: "xml", want: ReturnXML},
		{in: "JSON", want: ReturnJSON},
		{in: "Xml", want: ReturnXML},
		{in: "yaml", wantErr: "want xml or json"},
		{in: "", wantErr: "want xml or json"},
		{in: " json", wantErr: "want xml or json"},
	})
	var s string
	for _, tt := range []struct {
		choices []string
		want    string
	}{
		{[]string{"a"}, "want a"},
		{[]string{"a", "b", "c"}, "want a, b or c"},
	} {
		if err := newChoice(&s, "", tt.choices...).Set("z"); err == nil || err.Error() != tt.want {
			t.Errorf("choice %q: Set(z) = %v, want %q", tt.choices, err, tt.want)
		}
	}
}

func TestFlagLogLevel(t *testing.T) {
	checkValue(t, func() (pflag.Value, *zapcore.Level) {
		var l zapcore.Level
		return newLevelFlag(&l, zapcore.WarnLevel), &l
	}, []valueCase[zapcore.Level]{
		{in: "debug", want: zapcore.DebugLevel},
		{in: "ERROR", want: zapcore.ErrorLevel},
		{in: "warning", want: zapcore.WarnLevel},
		{in: "", want: zapcore.InfoLevel}, // as zapcore.ParseLevel had it
		{in: "loud", wantErr: `unrecognized level: "loud"`},
	})
}

func TestFlagCheckedString(t *testing.T) {
	t.Run("host", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *string) {
			var s string
			return newCheckedString(&s, defaultHost, checkHost), &s
		}, []valueCase[string]{
			{in: "0.0.0.0", want: "0.0.0.0"},
			{in: "::1", want: "::1"},
			{in: " ", want: " "}, // the listener reports it
			{in: "", wantErr: "empty host"},
		})
	})
	t.Run("tool schema", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *ToolSchema) {
			var s ToolSchema
			return newTextFlag(&s, SchemaJSR, parseToolSchema), &s
		}, []valueCase[ToolSchema]{
			{in: "jsr", want: SchemaJSR},
			{in: "pypi", want: SchemaPyPI},
			{in: "PyPI", wantErr: `unknown tool schema "PyPI": want jsr`},
			{in: " jsr", wantErr: "unknown tool schema"},
			{in: "", wantErr: "unknown tool schema"},
		})
	})
}

// TestFlagLists covers the lists' splitting; package main checks their
// entries (wire_test.go there).
func TestFlagLists(t *testing.T) {
	list := func(parse func(string) ([]string, error)) func() (pflag.Value, *[]string) {
		return func() (pflag.Value, *[]string) {
			var l []string
			return &listFlag{&l, parse}, &l
		}
	}
	t.Run("deps", func(t *testing.T) {
		checkValue(t, list(parseDeps), []valueCase[[]string]{
			{in: "numpy, pydantic>=2,,httpx", want: []string{"numpy", "pydantic>=2", "httpx"}},
			{in: "numpy,numpy", want: []string{"numpy", "numpy"}}, // the resolver merges them
			{in: "", want: nil},
			{in: " , ", want: nil},
		})
	})
	t.Run("allow net", func(t *testing.T) {
		checkValue(t, list(parseAllowNet), []valueCase[[]string]{
			{in: "Example.com:443, 127.0.0.1:8000,,", want: []string{"Example.com:443", " 127.0.0.1:8000"}},
			{in: "localhost", want: []string{"localhost"}},
			{in: "", want: nil}, // not set
			{in: " , ", wantErr: "no host given"},
			{in: ",", wantErr: "no host given"},
		})
	})
	t.Run("allow origin", func(t *testing.T) {
		checkValue(t, list(parseAllowOrigin), []valueCase[[]string]{
			{in: "https://App.example.com:443/, http://localhost:5173,",
				want: []string{"https://App.example.com:443/", "http://localhost:5173"}},
			{in: "*", want: []string{"*"}},
			{in: "", want: nil},
		})
	})
}

// TestFlagMount covers --mount's lines; package main parses and resolves
// them (wire_test.go there).
func TestFlagMount(t *testing.T) {
	checkValue(t, func() (pflag.Value, *[]string) {
		var ms []string
		return &mountFlag{&ms}, &ms
	}, []valueCase[[]string]{
		{in: "/a:/data", want: []string{"/a:/data"}},
		{in: `C:\data:/data:rw`, want: []string{`C:\data:/data:rw`}},
		{in: "/a:/a\n/b:/b:rw", want: []string{"/a:/a", "/b:/b:rw"}},
		{in: "/a:/a\r\n\n \n/b:/b\r\n", want: []string{"/a:/a", "/b:/b"}},
		{in: "", want: nil},
		{in: "\n", want: nil},
	})
	t.Run("repeated", func(t *testing.T) {
		var ms []string
		f := &mountFlag{&ms}
		for _, s := range []string{"/a:/a", "/b:/b:rw\n/c:/c"} {
			if err := f.Set(s); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{"/a:/a", "/b:/b:rw", "/c:/c"}; !reflect.DeepEqual(ms, want) {
			t.Fatalf("after two Sets: %v, want %v", ms, want)
		}
	})
}

// TestFlagDefaultsReadBack shows that every flag's default, as the help shows
// it, is a value the flag takes, except 0 where it means "not set".
func TestFlagDefaultsReadBack(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		var v flagValues
		fs := newFlagSet(&v, goos)
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Name == "warm" || f.Name == "queue" {
				if f.DefValue != "0" {
					t.Errorf("--%s: default %q, want 0 (not set)", f.Name, f.DefValue)
				}
				return
			}
			if err := f.Value.Set(f.DefValue); err != nil {
				t.Errorf("--%s: default %q: %v", f.Name, f.DefValue, err)
			}
			if got := f.Value.String(); got != f.DefValue {
				t.Errorf("--%s: default %q reads back as %q", f.Name, f.DefValue, got)
			}
		})
	}
}

// TestFlagUsageTypesAndDefaults pins what the help shows for the flags that
// check themselves: the same type names and defaults as pflag's own flags.
func TestFlagUsageTypesAndDefaults(t *testing.T) {
	text := Usage()
	for _, want := range []string{
		"--port int ", "(default 3001)",
		`--host string `, `(default "127.0.0.1")`,
		`--return-mode string `, `(default "xml")`,
		"--workers int ", "(default 2)",
		"--warm int ", "--queue int ",
		"--timeout duration ", "(default 1m0s)",
		"--queue-timeout duration ", "(default 30s)",
		"--mcp-session-idle duration ", "(default 30m0s)",
		`--memory-limit string `, `(default "1GiB")`,
		`--output-limit string `, `(default "1MiB")`,
		`--request-limit string `,
		`--log-level string `, `(default "warn")`,
		`--index-url string `, `(default "https://pypi.org/simple/")`,
		"--allow-net string ", "--deps string ", "--allow-origin string ",
		`--tool-schema string `, `(default "jsr")`,
		"--session-idle duration ", "--files-ttl duration ",
		"--max-sessions int ", "(default 4)",
		"--session-idle-cpu cores ", "(default 0.1)",
		"--files  ", "(default true)",
		`--files-limit string `, `(default "32MiB")`,
		`--files-store-limit string `, `(default "1GiB")`,
		`--image-limit string `,
		"--mount HOST:SANDBOX[:ro|rw] ",
		`--mount-limit string `, `(default "64MiB")`,
		"--mount-files int ", "(default 10000)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("usage text lacks %q", want)
		}
	}
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, "(default 0)") || strings.Contains(line, `(default "")`) || strings.Contains(line, "(default [])") {
			t.Errorf("usage shows an empty default: %q", line)
		}
	}
}
