package packages

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	pt "github.com/mcp-run-python/mcp-run-python/supervisor/packages/packagestest"
)

func TestWheelTags(t *testing.T) {
	ts := newTagSet("3.14", []string{"pyemscripten_2026_0_wasm32", "emscripten_5_0_3_wasm32"})
	tests := []struct {
		file string
		ok   bool
	}{
		{"foo-1.0-py3-none-any.whl", true},
		{"foo-1.0-py2.py3-none-any.whl", true},
		{"foo-1.0-py314-none-any.whl", true},
		{"foo-1.0-py30-none-any.whl", true},
		{"foo-1.0-cp314-none-any.whl", true},
		{"foo-1.0-1-py3-none-any.whl", true}, // build tag
		{"foo-1.0-cp314-cp314-pyemscripten_2026_0_wasm32.whl", true},
		{"foo-1.0-cp314-cp314-emscripten_5_0_3_wasm32.whl", true},
		{"foo-1.0-cp39-abi3-pyemscripten_2026_0_wasm32.whl", true},
		{"foo-1.0-cp314-abi3-pyemscripten_2026_0_wasm32.whl", true},
		{"foo-1.0-py3-none-pyemscripten_2026_0_wasm32.whl", true},
		{"foo-1.0-cp314-cp314-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", false},
		{"foo-1.0-cp313-cp313-pyemscripten_2026_0_wasm32.whl", false},
		{"foo-1.0-cp315-abi3-pyemscripten_2026_0_wasm32.whl", false},
		{"foo-1.0-cp314-cp314-pyodide_2024_0_wasm32.whl", false},
		{"foo-1.0-py2-none-any.whl", false},
		{"foo-1.0-py3-none-win_amd64.whl", false},
		{"foo-1.0-pp310-pypy310_pp73-any.whl", false},
	}
	for _, tc := range tests {
		w, ok := parseWheelName(tc.file)
		if !ok {
			t.Fatalf("%s: not parsed", tc.file)
		}
		if got := ts.rank(w) >= 0; got != tc.ok {
			t.Errorf("%s: accepted = %v, want %v", tc.file, got, tc.ok)
		}
	}
	// More specific wheels rank better.
	rank := func(f string) int { w, _ := parseWheelName(f); return ts.rank(w) }
	order := []string{
		"foo-1.0-cp314-cp314-pyemscripten_2026_0_wasm32.whl",
		"foo-1.0-cp314-abi3-pyemscripten_2026_0_wasm32.whl",
		"foo-1.0-cp39-abi3-pyemscripten_2026_0_wasm32.whl",
		"foo-1.0-py3-none-pyemscripten_2026_0_wasm32.whl",
		"foo-1.0-py3-none-any.whl",
	}
	for i := 1; i < len(order); i++ {
		if rank(order[i-1]) >= rank(order[i]) {
			t.Errorf("%s should rank before %s", order[i-1], order[i])
		}
	}
	for _, bad := range []string{"foo-1.0.tar.gz", "foo-1.0.whl", "foo-1.0-x-py3-none-any.whl", "-1.0-py3-none-any.whl", "foo-1.0-a-b-c-d-e.whl"} {
		if _, ok := parseWheelName(bad); ok {
			t.Errorf("%s parsed as a wheel", bad)
		}
	}
}

func TestParseMetadata(t *testing.T) {
	md, err := parseMetadata([]byte("Metadata-Version: 2.1\r\nName: Foo\r\nVersion: 1.0\r\nRequires-Python: >=3.8\r\nLicense: MIT\r\n        more\r\nRequires-Dist: bar>=1\r\nRequires-Dist: baz;\r\n  extra == 'x'\r\nnonsense line\r\n\r\nRequires-Dist: body-is-ignored\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Metadata{Name: "Foo", Version: "1.0", RequiresPython: ">=3.8", RequiresDist: []string{"bar>=1", "baz; extra == 'x'"}}
	if !reflect.DeepEqual(md, want) {
		t.Errorf("got %+v, want %+v", md, want)
	}
	if _, err := parseMetadata([]byte("Name: x\n")); err == nil {
		t.Error("metadata without Version accepted")
	}
}

func TestWheelMetadata(t *testing.T) {
	data, _ := pt.Wheel{Name: "My.Pkg", Version: "2.0", RequiresPython: ">=3.9", Requires: []string{"dep>=1", `opt; extra == "fast"`}}.Build()
	md, err := wheelMetadata(bytes.NewReader(data), int64(len(data)), "my-pkg")
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "My.Pkg" || md.Version != "2.0" || md.RequiresPython != ">=3.9" || len(md.RequiresDist) != 2 {
		t.Errorf("got %+v", md)
	}
	if _, err := wheelMetadata(bytes.NewReader([]byte("not a zip")), 9, "x"); err == nil {
		t.Error("a non-zip gave metadata")
	}
}

// TestMetadataHostile: core metadata from a hostile index (PEP 658, or a
// wheel's METADATA) is refused, or read in one linear pass, never hung on.
func TestMetadataHostile(t *testing.T) {
	head := "Metadata-Version: 2.1\nName: a\nVersion: 1.0\n"
	tests := []struct {
		name    string
		data    string
		inWheel bool
		want    string // the error, "" for none
	}{
		// Joined one by one, these took hours: 83 s for 768 KiB of them.
		{name: "4 MiB of continuation lines", data: head + "Requires-Dist: b" + strings.Repeat("\n x", 4<<20/3) + "\n"},
		{name: "a long description's continuation lines", data: head + "Description: d" + strings.Repeat("\n        line", 1<<18) + "\n"},
		{name: "too many requirements", data: head + strings.Repeat("Requires-Dist: b\n", maxMetadataEntries+1),
			want: "core metadata with more than 10000 Requires-Dist and Provides-Extra entries"},
		{name: "a METADATA past the limit", data: head + strings.Repeat("Summary: x\n", maxMetadataSize/11), inWheel: true,
			want: "wheel METADATA is larger than 16777216 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.inWheel {
				var b bytes.Buffer
				zw := zip.NewWriter(&b)
				w, _ := zw.Create("a-1.0.dist-info/METADATA")
				_, _ = io.WriteString(w, tt.data)
				if err := zw.Close(); err != nil {
					t.Fatal(err)
				}
				_, err = wheelMetadata(bytes.NewReader(b.Bytes()), int64(b.Len()), "a")
			} else {
				_, err = parseMetadata([]byte(tt.data))
			}
			if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
