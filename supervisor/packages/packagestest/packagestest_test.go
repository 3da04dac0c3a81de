package packagestest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddWheelFile(t *testing.T) {
	dir := t.TempDir()
	w := Wheel{Name: "Some.Project", Version: "1.2", RequiresPython: ">=3.8", Requires: []string{"dep>=1"}}
	data, md := w.Build()
	good := filepath.Join(dir, w.Filename())
	if err := os.WriteFile(good, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Repo{}
	f, err := r.AddWheelFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if f.Project != "some-project" || f.Filename != w.Filename() || f.SHA256 != SHA256(data) ||
		f.RequiresPython != ">=3.8" || string(f.Metadata) != string(md) || len(r.Files) != 1 {
		t.Errorf("got %+v", *f)
	}

	bad := []struct{ name, file, want string }{
		{"missing", "", "reading the wheel"},
		{"not a wheel name", "x.zip", "is not named as a wheel"},
		{"not a zip", "x-1.0-py3-none-any.whl", "x-1.0-py3-none-any.whl: zip"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "nothing-here.whl")
			if tc.file != "" {
				path = filepath.Join(dir, tc.file)
				if err := os.WriteFile(path, []byte("not a zip"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := (&Repo{}).AddWheelFile(path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
