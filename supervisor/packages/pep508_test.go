package packages

import (
	"reflect"
	"testing"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"Friendly-Bard": "friendly-bard", "FRIENDLY_BARD": "friendly-bard", "friendly.bard": "friendly-bard",
		"friendly--._bard": "friendly-bard", "pydantic_core": "pydantic-core", "a": "a",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRequirement(t *testing.T) {
	tests := []struct {
		in      string
		name    string
		extras  []string
		spec    string
		url     string
		marker  string
		wantErr bool
	}{
		{in: "requests", name: "requests"},
		{in: "  requests  ", name: "requests"},
		{in: "requests>=2.8.1,==2.8.*", name: "requests", spec: ">=2.8.1,==2.8.*"},
		{in: "requests [security,tests] >= 2.8.1, == 2.8.* ; python_version < '2.7'", name: "requests",
			extras: []string{"security", "tests"}, spec: ">=2.8.1,==2.8.*", marker: "python_version < '2.7'"},
		{in: "name[Foo_Bar, baz]", name: "name", extras: []string{"foo-bar", "baz"}},
		{in: "name[]", name: "name"},
		{in: "name (>=1.0, <2)", name: "name", spec: ">=1.0,<2"},
		{in: "A.B-C_D", name: "A.B-C_D"},
		{in: "pip @ https://github.com/pypa/pip/archive/1.3.1.zip#sha1=da9234ee", name: "pip",
			url: "https://github.com/pypa/pip/archive/1.3.1.zip#sha1=da9234ee"},
		{in: `name @ file:///x.whl ; os_name == "a"`, name: "name", url: "file:///x.whl", marker: `os_name == "a"`},
		{in: `name;extra=="x"`, name: "name", marker: `extra=="x"`},
		{in: "", wantErr: true},
		{in: "-name", wantErr: true},
		{in: "name-", name: "name", wantErr: true},
		{in: "name[", wantErr: true},
		{in: "name[a b]", wantErr: true},
		{in: "name >= ", wantErr: true},
		{in: "name (>=1.0", wantErr: true},
		{in: "name; bogus == 'x'", wantErr: true},
		{in: "name; os_name == 'x' and", wantErr: true},
		{in: "name @ ", wantErr: true},
		{in: "name @ http://x y", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParseRequirement(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parsed: %+v", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			marker := ""
			if r.Marker != nil {
				marker = r.Marker.String()
			}
			if r.Name != tc.name || !reflect.DeepEqual(r.Extras, tc.extras) || r.Specifier.String() != tc.spec ||
				r.URL != tc.url || marker != tc.marker || r.String() != tc.in {
				t.Errorf("got name=%q extras=%q spec=%q url=%q marker=%q", r.Name, r.Extras, r.Specifier, r.URL, marker)
			}
		})
	}
}

func TestMarkers(t *testing.T) {
	env := PyodideEnvironment("3.14.2", "5.0.3")
	tests := []struct {
		marker string
		extra  string
		want   bool
	}{
		{`sys_platform == "emscripten"`, "", true},
		{`sys_platform == "linux"`, "", false},
		{`sys_platform != "win32" and platform_system == "Emscripten"`, "", true},
		{`platform_machine == 'wasm32' and os_name == 'posix'`, "", true},
		{`implementation_name == "cpython" and platform_python_implementation == 'CPython'`, "", true},
		{`python_version >= "3.8"`, "", true},
		{`python_version < "3.10"`, "", false},
		{`python_version > "3.9"`, "", true}, // a version comparison: "3.14" > "3.9"
		{`python_full_version >= "3.14.1"`, "", true},
		{`python_full_version == "3.14.*"`, "", true},
		{`python_version ~= "3.12"`, "", true},
		{`"3.8" <= python_version`, "", true},
		{`platform_release >= "5"`, "", true},
		{`implementation_version == "3.14.2"`, "", true},
		{`"linux" in sys_platform`, "", false},
		{`"emscripten" in sys_platform`, "", true},
		{`'win' not in sys_platform`, "", true},
		{`extra == "socks"`, "", false},
		{`extra == "socks"`, "socks", true},
		{`extra == "Socks_Proxy"`, "socks-proxy", true},
		{`(sys_platform == "linux" or sys_platform == "emscripten") and extra == "x"`, "x", true},
		{`sys_platform == "linux" or sys_platform == "emscripten" and extra == "x"`, "", false},
		{`sys_platform == "emscripten" or sys_platform == "linux" and extra == "x"`, "", true},
		{`sys.platform == "emscripten" and os.name == "posix"`, "", true},
		{`python_implementation == "CPython"`, "", true},
		{`platform_version < "abc"`, "", true}, // a string comparison: "#1" < "abc"
	}
	for _, tc := range tests {
		t.Run(tc.marker+"/"+tc.extra, func(t *testing.T) {
			m, err := ParseMarker(tc.marker)
			if err != nil {
				t.Fatal(err)
			}
			e := Environment{}
			for k, v := range env {
				e[k] = v
			}
			e["extra"] = tc.extra
			if got := m.Evaluate(e); got != tc.want {
				t.Errorf("= %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `os_name`, `os_name ==`, `os_name = "x"`, `(os_name == "x"`, `os_name == "x`, `os_name not "x"`, `nope == "x"`, `os_name == "x" os_name == "y"`} {
		if _, err := ParseMarker(bad); err == nil {
			t.Errorf("ParseMarker(%q) succeeded", bad)
		}
	}
}
