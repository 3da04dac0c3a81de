package packages

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseLock(t *testing.T) {
	l := makeLock(t).parsed(t)
	if l.Info.Python != "3.14.2" || l.PythonVersion() != "3.14" || len(l.Packages) != 3 {
		t.Fatalf("lock: %+v", l)
	}
	p, ok := l.Package("Builtin_Native")
	if !ok || p.Name != "builtin_native" || p.Version != "0.3" || p.PackageType != TypePackage {
		t.Errorf("Package: %+v, %v", p, ok)
	}
	if lib, _ := l.Package("libfoo"); lib.PackageType != TypeSharedLibrary || lib.InstallDir != "dynlib" {
		t.Errorf("libfoo: %+v", lib)
	}
	table := l.ImportTable()
	if table["bi"] != "builtin" || table["builtin_native"] != "builtin-native" || len(table) != 3 {
		t.Errorf("ImportTable: %v", table)
	}
	tags := l.PlatformTags()
	want := []string{"pyemscripten_2026_0_wasm32", "emscripten_5_0_3_wasm32", "pyodide_2026_0_wasm32"}
	if !slices.Equal(tags, want) {
		t.Errorf("PlatformTags = %v, want %v", tags, want)
	}
	env := l.Environment()
	if env["python_full_version"] != "3.14.2" || env["python_version"] != "3.14" || env["sys_platform"] != "emscripten" ||
		env["platform_release"] != "5.0.3" || env["platform_machine"] != "wasm32" {
		t.Errorf("Environment: %v", env)
	}
}

func TestParseLockErrors(t *testing.T) {
	good := `"version": "1", "file_name": "a-1-py3-none-any.whl", "sha256": "` + strings.Repeat("a", 64) + `"`
	tests := map[string]string{
		"not JSON":        `{`,
		"no python":       `{"info": {}, "packages": {}}`,
		"null package":    `{"info": {"python": "3.14.2"}, "packages": {"a": null}}`,
		"no version":      `{"info": {"python": "3.14.2"}, "packages": {"a": {"file_name": "a.whl", "sha256": "` + strings.Repeat("a", 64) + `"}}}`,
		"path file name":  `{"info": {"python": "3.14.2"}, "packages": {"a": {"version": "1", "file_name": "../a.whl", "sha256": "` + strings.Repeat("a", 64) + `"}}}`,
		"bad sha256":      `{"info": {"python": "3.14.2"}, "packages": {"a": {"version": "1", "file_name": "a.whl", "sha256": "xyz"}}}`,
		"missing file":    `{"info": {"python": "3.14.2"}, "packages": {"a": {"version": "1", "sha256": "` + strings.Repeat("a", 64) + `"}}}`,
		"_ok (reference)": `{"info": {"python": "3.14.2"}, "packages": {"a": {` + good + `}}}`,
	}
	for name, doc := range tests {
		_, err := ParseLock([]byte(doc))
		if (err == nil) != strings.HasPrefix(name, "_ok") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := ReadLock(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("ReadLock of a missing file succeeded")
	}
}
