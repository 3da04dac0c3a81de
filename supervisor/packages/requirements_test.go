package packages

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestFromCode(t *testing.T) {
	tests := []struct {
		name       string
		code       string
		want       []string
		fromScript bool
		errText    string
	}{
		{
			name: "valid",
			code: "# /// script\n# requires-python = \">=3.12\"\n# dependencies = [\n#   \"pydantic>=2\",\n#   'rich[jupyter]; python_version >= \"3.8\"',\n# ]\n#\n# [tool.x]\n# y = 1\n# ///\nimport pydantic\n",
			want: []string{"pydantic>=2", `rich[jupyter]; python_version >= "3.8"`, "python>=3.12"}, fromScript: true,
		},
		{name: "the tool description's example", code: "# /// script\n# dependencies = ['pydantic']\n# ///\nprint('python code here')\n", want: []string{"pydantic"}, fromScript: true},
		{name: "no block", code: "import numpy\nprint(1)\n", want: nil, fromScript: false},
		{name: "empty code", code: "", want: nil, fromScript: false},
		{name: "block without dependencies", code: "# /// script\n# requires-python = \">=3.11\"\n# ///\n", want: []string{"python>=3.11"}, fromScript: true},
		{name: "requires-python not a specifier", code: "# /// script\n# requires-python = \"three\"\n# ///\n", fromScript: true, errText: `requires-python "three"`},
		{name: "requires-python not a string", code: "# /// script\n# requires-python = 3\n# ///\n", fromScript: true, errText: "requires-python must be a string, not an integer"},
		{name: "empty dependencies", code: "# /// script\n# dependencies = []\n# ///\n", want: []string{}, fromScript: true},
		{name: "other block types are ignored", code: "# /// pyproject\n# dependencies = ['x']\n# ///\n", want: nil, fromScript: false},
		{name: "unclosed block is no block", code: "# /// script\n# dependencies = ['x']\nprint(1)\n", want: nil, fromScript: false},
		{name: "block after code", code: "x = 1\n\n# /// script\n# dependencies = ['attrs']\n# ///\n", want: []string{"attrs"}, fromScript: true},
		{name: "two blocks", code: "# /// script\n# dependencies = ['a']\n# ///\n\n# /// script\n# dependencies = ['b']\n# ///\n", fromScript: true, errText: "2 script blocks"},
		{name: "bad TOML", code: "# /// script\n# dependencies = ['a'\n# ///\n", fromScript: true, errText: "invalid TOML"},
		{name: "dependencies not a list", code: "# /// script\n# dependencies = 'pydantic'\n# ///\n", fromScript: true, errText: "dependencies must be a list of strings, not a string"},
		{name: "dependency not a string", code: "# /// script\n# dependencies = ['a', 3]\n# ///\n", fromScript: true, errText: "dependencies[1] must be a string, not an integer"},
		{name: "dependencies a table", code: "# /// script\n# [dependencies]\n# a = 1\n# ///\n", fromScript: true, errText: "not a table"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, fromScript, err := FromCode(tc.code)
			if fromScript != tc.fromScript {
				t.Errorf("fromScript = %v, want %v", fromScript, tc.fromScript)
			}
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestInferImportsPackages checks the packages InferImports names, in
// order; TestInferImports checks the rest of each Inferred.
func TestInferImportsPackages(t *testing.T) {
	table := map[string]string{"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn", "ruamel.yaml": "ruamel-yaml", "skimage": "scikit-image"}
	importable := func(name string) bool { return name == "json" || name == "os" || name == "numpy" }
	tests := []struct {
		name       string
		imports    []string
		importable func(string) bool
		want       []string
	}{
		{name: "table and fallback", imports: []string{"yaml", "requests", "PIL"}, importable: importable, want: []string{"pyyaml", "requests", "pillow"}},
		{name: "importable skipped", imports: []string{"json", "numpy", "os", "attrs"}, importable: importable, want: []string{"attrs"}},
		{name: "nil importable", imports: []string{"numpy"}, want: []string{"numpy"}},
		{name: "dotted known", imports: []string{"ruamel.yaml"}, want: []string{"ruamel-yaml"}},
		{name: "dotted unknown skipped", imports: []string{"a.b", "x.y.z"}, want: nil},
		{name: "well-known names", imports: []string{"bs4", "slugify", "dateutil", "cv2", "attr", "Crypto", "jwt", "git", "fitz"},
			want: []string{"beautifulsoup4", "python-slugify", "python-dateutil", "opencv-python", "attrs", "pycryptodome", "PyJWT", "GitPython", "PyMuPDF"}},
		{name: "the lock wins over the well-known table", imports: []string{"yaml", "PIL"}, want: []string{"pyyaml", "pillow"}},
		{name: "namespace parent of a known dotted name", imports: []string{"google", "google.protobuf"}, want: []string{"protobuf"}},
		{name: "namespace parent of a lock dotted name", imports: []string{"ruamel", "ruamel.yaml"}, want: []string{"ruamel-yaml"}},
		{name: "unknown parent and child", imports: []string{"other", "other.sub"}, want: []string{"other"}},
		{name: "relative and empty skipped", imports: []string{".local", "", " "}, want: nil},
		{name: "first-seen order, no duplicates", imports: []string{"sklearn", "yaml", "sklearn", "scikit_learn", "yaml"}, want: []string{"scikit-learn", "pyyaml"}},
		{name: "nothing", imports: nil, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, inf := range InferImports(tc.imports, tc.importable, table) {
				got = append(got, inf.Package)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestInferImports(t *testing.T) {
	table := map[string]string{"yaml": "pyyaml"}
	got := InferImports([]string{"yaml", "bs4", "cPickle", "google", "google.protobuf"}, nil, table)
	want := []Inferred{
		{Import: "yaml", Package: "pyyaml", Builtin: true},
		{Import: "bs4", Package: "beautifulsoup4"},
		{Import: "cPickle", Package: "cPickle", Guessed: true},
		{Import: "google.protobuf", Package: "protobuf"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if m := want[3].Module(); m != "google" {
		t.Errorf("Module of google.protobuf = %q", m)
	}
}

func TestKnownImportsAreValid(t *testing.T) {
	for imp, pkg := range knownImports {
		if _, err := ParseRequirement(pkg); err != nil || imp == "" || strings.HasPrefix(imp, ".") {
			t.Errorf("%q → %q: %v", imp, pkg, err)
		}
		// Undotted names stand for the project of the same name anyway;
		// dotted ones need the entry.
		if !strings.Contains(imp, ".") && Normalize(imp) == Normalize(pkg) {
			t.Errorf("%q → %q: the same project; drop the entry", imp, pkg)
		}
	}
}

func TestWithoutPython(t *testing.T) {
	got := WithoutPython([]string{"python-dateutil", "pythonnet>=1", "numpy", "python>=3.12"})
	if want := []string{"python-dateutil", "pythonnet>=1", "numpy"}; !slices.Equal(got, want) {
		t.Errorf("WithoutPython = %q, want %q", got, want)
	}
}
