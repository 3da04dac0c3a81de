package packages

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"strings"
)

// WheelModules returns the top-level modules and packages the wheel at path
// provides once installed: the names in its .dist-info/top_level.txt, and
// the first path component of every file its RECORD lists (the archive's
// own file list when there is no RECORD or it is empty). Both are read:
// top_level.txt is written by setuptools only, and even there may leave out
// a namespace package or a module added by a build hook; RECORD lists every
// installed file of any build backend.
//
// It is how a project chosen because of an import name is checked to really
// provide that module before it is installed: a look-alike project that
// took the name on the index does not.
func WheelModules(path string) (map[string]bool, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("reading wheel: %w", err)
	}
	defer zr.Close()
	return wheelModules(&zr.Reader)
}

// maxRecordSize bounds a top_level.txt or RECORD read from a wheel.
const maxRecordSize = 16 << 20

func wheelModules(zr *zip.Reader) (map[string]bool, error) {
	mods := map[string]bool{}
	var record []string
	haveRecord := false
	for _, f := range zr.File {
		dir, file, ok := strings.Cut(f.Name, "/")
		if !ok || !strings.HasSuffix(dir, ".dist-info") || (file != "top_level.txt" && file != "RECORD") {
			continue
		}
		data, err := readZipFile(f)
		if err != nil {
			return nil, err
		}
		if file == "top_level.txt" {
			for _, line := range strings.Split(string(data), "\n") {
				if name := strings.TrimSpace(line); name != "" {
					name, _, _ = strings.Cut(strings.ReplaceAll(name, "/", "."), ".")
					mods[name] = true
				}
			}
			continue
		}
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = -1
		rows, err := r.ReadAll()
		if err != nil {
			return nil, fmt.Errorf("reading wheel %s: %w", f.Name, err)
		}
		for _, row := range rows {
			if len(row) > 0 && row[0] != "" {
				record = append(record, row[0])
				haveRecord = true
			}
		}
	}
	if !haveRecord {
		for _, f := range zr.File {
			record = append(record, f.Name)
		}
	}
	for _, p := range record {
		if m := topModule(p); m != "" {
			mods[m] = true
		}
	}
	return mods, nil
}

// topModule returns the top-level module an installed file belongs to:
// "pkg" for "pkg/x.py", "mod" for "mod.py" or "mod.cpython-314-….so", and
// "" for metadata, scripts, data and .pth files.
func topModule(p string) string {
	p = strings.TrimPrefix(strings.ReplaceAll(p, `\`, "/"), "./")
	first, rest, isDir := strings.Cut(p, "/")
	if strings.HasSuffix(first, ".data") && isDir {
		// NAME.data/purelib/... and platlib/... install into site-packages.
		sub, after, ok := strings.Cut(rest, "/")
		if !ok || (sub != "purelib" && sub != "platlib") {
			return ""
		}
		return topModule(after)
	}
	if first == "" || first == ".." || strings.HasSuffix(first, ".dist-info") || first == "__pycache__" {
		return ""
	}
	if isDir {
		return first
	}
	for _, ext := range []string{".py", ".pyc", ".so", ".pyd"} {
		if strings.HasSuffix(first, ext) {
			name, _, _ := strings.Cut(first, ".")
			return name
		}
	}
	return ""
}

func readZipFile(f *zip.File) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("reading wheel %s: %w", f.Name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxRecordSize))
	if err != nil {
		return nil, fmt.Errorf("reading wheel %s: %w", f.Name, err)
	}
	return data, nil
}
