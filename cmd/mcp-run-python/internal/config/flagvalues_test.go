package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
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

func TestSizeText(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1023, "1023"},
		{1 << 10, "1KiB"},
		{1536, "1536"},
		{3 << 10, "3KiB"},
		{(1 << 20) + (1 << 10), "1025KiB"},
		{supervisor.DefaultFilesLimit, "32MiB"},
		{supervisor.DefaultMountBytes, "64MiB"},
		{1 << 30, "1GiB"},
		{5 << 40, "5120GiB"},
		{1e9, "1000000000"}, // not a power of 1024
		{math.MaxInt64, "9223372036854775807"},
	}
	for _, tt := range tests {
		got := sizeText(tt.in)
		if got != tt.want {
			t.Errorf("sizeText(%d) = %q, want %q", tt.in, got, tt.want)
		}
		var n int64
		if err := newByteSize(&n, "0", math.MaxInt64).Set(got); err != nil || n != tt.in {
			t.Errorf("sizeText(%d) = %q reads back as %d, %v", tt.in, got, n, err)
		}
	}
}

func TestFlagChoice(t *testing.T) {
	checkValue(t, func() (pflag.Value, *render.ReturnMode) {
		var m render.ReturnMode
		return newChoice(&m, render.ReturnXML, render.ReturnXML, render.ReturnJSON), &m
	}, []valueCase[render.ReturnMode]{
		{in: "json", want: render.ReturnJSON},
		{in: "xml", want: render.ReturnXML},
		{in: "JSON", want: render.ReturnJSON},
		{in: "Xml", want: render.ReturnXML},
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
	t.Run("index URL", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *string) {
			var s string
			return newCheckedString(&s, "https://pypi.org/simple/", packages.CheckLocation), &s
		}, []valueCase[string]{
			{in: "http://mirror.test/simple/", want: "http://mirror.test/simple/"},
			{in: "file:///srv/simple", want: "file:///srv/simple"},
			{in: "/srv/simple", want: "/srv/simple"},
			{in: "ftp://mirror/simple", wantErr: "only http, https and file URLs"},
			{in: "", wantErr: "empty location"},
		})
	})
	t.Run("tool schema", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *mcpserver.ToolSchema) {
			var s mcpserver.ToolSchema
			return newTextFlag(&s, mcpserver.SchemaJSR, mcpserver.ParseToolSchema), &s
		}, []valueCase[mcpserver.ToolSchema]{
			{in: "jsr", want: mcpserver.SchemaJSR},
			{in: "pypi", want: mcpserver.SchemaPyPI},
			{in: "PyPI", wantErr: `unknown tool schema "PyPI": want jsr`},
			{in: " jsr", wantErr: "unknown tool schema"},
			{in: "", wantErr: "unknown tool schema"},
		})
	})
	t.Run("optional location", func(t *testing.T) {
		checkValue(t, func() (pflag.Value, *string) {
			var s string
			return newCheckedString(&s, "", checkOptionalLocation), &s
		}, []valueCase[string]{
			{in: "", want: ""},
			{in: "https://cdn.test/pyodide/", want: "https://cdn.test/pyodide/"},
			{in: "s3://bucket/", wantErr: "only http, https and file URLs"},
		})
	})
}

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
			{in: "numpy,pydantic>=>2", wantErr: `invalid requirement "pydantic>=>2"`},
		})
	})
	t.Run("allow net", func(t *testing.T) {
		checkValue(t, list(parseAllowNet), []valueCase[[]string]{
			{in: "Example.com:443, 127.0.0.1:8000,::1,[::1]:80,example.com:443,",
				want: []string{"example.com:443", "127.0.0.1:8000", "[::1]", "[::1]:80"}},
			{in: "localhost", want: []string{"localhost"}},
			{in: "a.com,A.COM", want: []string{"a.com"}},
			{in: "", want: nil}, // not set
			{in: " , ", wantErr: "no host given"},
			{in: ",", wantErr: "no host given"},
			{in: "https://example.com", wantErr: "not a URL or path"},
			{in: "a.com:1,b.com:99999", wantErr: `"b.com:99999"`},
			{in: "a b", wantErr: `"a b"`},
		})
	})
	t.Run("allow origin", func(t *testing.T) {
		checkValue(t, list(parseAllowOrigin), []valueCase[[]string]{
			{in: "https://App.example.com:443/, http://localhost:5173",
				want: []string{"https://app.example.com", "http://localhost:5173"}},
			{in: "*", want: []string{"*"}},
			{in: "", want: nil},
			{in: "a.example.com", wantErr: `"a.example.com" is not an origin`},
			{in: "null", wantErr: `"null" is not an origin`},
		})
	})
}

// mountFolders returns a temporary folder and two folders a and b in it.
func mountFolders(t *testing.T) (dir, a, b string) {
	t.Helper()
	dir = t.TempDir()
	a, b = filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir, a, b
}

// ro and rw are the mounts of host at sandbox, read-only and writable.
func ro(host, sandbox string) mount.Mount { return mount.Mount{Host: host, Sandbox: sandbox} }
func rw(host, sandbox string) mount.Mount {
	return mount.Mount{Host: host, Sandbox: sandbox, Writable: true}
}

func TestFlagMount(t *testing.T) {
	dir, a, b := mountFolders(t)
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	checkValue(t, func() (pflag.Value, *[]mount.Mount) {
		var ms []mount.Mount
		return &mountFlag{&ms}, &ms
	}, []valueCase[[]mount.Mount]{
		{in: a + ":/data", want: []mount.Mount{ro(a, "/data")}},
		{in: a + ":/data:ro", want: []mount.Mount{ro(a, "/data")}},
		{in: a + string(filepath.Separator) + ":/data/:rw", want: []mount.Mount{rw(a, "/data")}},
		{in: ".:/src", want: []mount.Mount{ro(cwd, "/src")}},
		{in: a + ":/a\n" + b + ":/b:rw", want: []mount.Mount{ro(a, "/a"), rw(b, "/b")}},
		{in: a + ":/a\r\n\n \n" + b + ":/b\r\n", want: []mount.Mount{ro(a, "/a"), ro(b, "/b")}},
		{in: a + ":/x\n" + a + ":/y", want: []mount.Mount{ro(a, "/x"), ro(a, "/y")}}, // one folder twice
		{in: a + ":/data/a\n" + b + ":/data/ab", want: []mount.Mount{ro(a, "/data/a"), ro(b, "/data/ab")}},
		{in: "", want: nil},
		{in: "\n", want: nil},
		{in: "data", wantErr: `"data": no SANDBOX path; want HOST:SANDBOX[:ro|rw]`},
		{in: ":/data", wantErr: "empty HOST"},
		{in: a + ":data", wantErr: `SANDBOX "data" is not an absolute path`},
		{in: a + ":/", wantErr: "SANDBOX may not be /"},
		{in: a + ":/lib/site", wantErr: "Pyodide's own /lib"},
		{in: a + ":/data:rx", wantErr: `mode "rx" is neither ro nor rw`},
		{in: a + ":/data:rw:ro", wantErr: "too many ':'"},
		{in: a + ":/a\nbad", wantErr: `"bad": no SANDBOX path`},
		{in: filepath.Join(dir, "missing") + ":/data", wantErr: "host folder"},
		{in: file + ":/data", wantErr: "is not a folder"},
		{in: `C:\mcp-run-python-missing:/data`, wantErr: "host folder"}, // resolved from the working directory but on Windows
		{in: a + ":/data\n" + b + ":/data:rw", wantErr: "overlap in the sandbox"},
		{in: a + ":/data\n" + b + ":/data/sub", wantErr: "overlap in the sandbox"},
		{in: a + ":/data/sub\n" + b + ":/data", wantErr: "overlap in the sandbox"},
	})
	t.Run("repeated", func(t *testing.T) {
		var ms []mount.Mount
		f := &mountFlag{&ms}
		if err := f.Set(a + ":/a"); err != nil {
			t.Fatal(err)
		}
		if err := f.Set(b + ":/b:rw"); err != nil {
			t.Fatal(err)
		}
		if want := []mount.Mount{ro(a, "/a"), rw(b, "/b")}; !reflect.DeepEqual(ms, want) {
			t.Fatalf("after two Sets: %v, want %v", ms, want)
		}
		if err := f.Set(b + ":/a/b"); err == nil || !strings.Contains(err.Error(), "overlap") {
			t.Errorf("Set of an overlapping mount: %v", err)
		}
		if err := f.Set(b + ":/c\n" + a + ":/b/c"); err == nil || len(ms) != 2 {
			t.Errorf("Set of a list with an overlapping mount: %v, mounts %v", err, ms)
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

// TestParseAllowOrigin covers --allow-origin's entries.
func TestParseAllowOrigin(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"*", []string{"*"}, false},
		{"https://App.Example.com/", []string{"https://app.example.com"}, false},
		{"http://localhost:80, https://a.example:443,https://b.example:8443", []string{"http://localhost", "https://a.example", "https://b.example:8443"}, false},
		{"http://[::1]:5173", []string{"http://[::1]:5173"}, false},
		{"app.example.com", nil, true},
		{"https://app.example.com/path", nil, true},
		{"https://user@app.example.com", nil, true},
		{"null", nil, true},
	}
	for _, tt := range tests {
		got, err := parseAllowOrigin(tt.in)
		if (err != nil) != tt.wantErr || strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("parseAllowOrigin(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
