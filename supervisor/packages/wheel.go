package packages

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// wheelName is a parsed PEP 427 wheel file name:
// {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl.
type wheelName struct {
	name, version, build string
	// tags are the expanded "python-abi-platform" triples (compressed tag
	// sets such as "py2.py3" give one triple each).
	tags []string
}

// parseWheelName parses a wheel file name; ok is false for anything that
// is not a well-formed wheel name (sdists included).
func parseWheelName(filename string) (w wheelName, ok bool) {
	base, found := strings.CutSuffix(filename, ".whl")
	if !found {
		return wheelName{}, false
	}
	parts := strings.Split(base, "-")
	switch len(parts) {
	case 5:
	case 6:
		w.build = parts[2]
		if w.build == "" || w.build[0] < '0' || w.build[0] > '9' {
			return wheelName{}, false
		}
	default:
		return wheelName{}, false
	}
	w.name, w.version = parts[0], parts[1]
	n := len(parts)
	for _, py := range strings.Split(parts[n-3], ".") {
		for _, abi := range strings.Split(parts[n-2], ".") {
			for _, plat := range strings.Split(parts[n-1], ".") {
				w.tags = append(w.tags, py+"-"+abi+"-"+plat)
			}
		}
	}
	if w.name == "" || w.version == "" {
		return wheelName{}, false
	}
	return w, true
}

// tagSet ranks the wheel tags Pyodide's interpreter accepts; a lower rank
// is a better (more specific) match, as pip orders them.
type tagSet map[string]int

// newTagSet builds the accepted tags for CPython pythonVersion ("3.14") on
// the given platform tags (e.g. "pyemscripten_2026_0_wasm32"), in the order
// of packaging.tags.sys_tags: interpreter-specific ABI, then abi3 for every
// older minor, then no ABI, then pure Python for any platform.
func newTagSet(pythonVersion string, platforms []string) tagSet {
	major, minor := 3, 0
	if mm := strings.SplitN(pythonVersion, ".", 3); len(mm) >= 2 {
		major, _ = strconv.Atoi(mm[0])
		minor, _ = strconv.Atoi(mm[1])
	}
	cp := fmt.Sprintf("cp%d%d", major, minor)
	ts := tagSet{}
	add := func(t string) {
		if _, ok := ts[t]; !ok {
			ts[t] = len(ts)
		}
	}
	for _, plat := range platforms {
		add(cp + "-" + cp + "-" + plat)
	}
	for m := minor; m >= 2; m-- {
		for _, plat := range platforms {
			add(fmt.Sprintf("cp%d%d-abi3-%s", major, m, plat))
		}
	}
	for _, plat := range platforms {
		add(cp + "-none-" + plat)
	}
	pys := []string{fmt.Sprintf("py%d%d", major, minor), fmt.Sprintf("py%d", major)}
	for m := minor - 1; m >= 0; m-- {
		pys = append(pys, fmt.Sprintf("py%d%d", major, m))
	}
	for _, plat := range platforms {
		for _, py := range pys {
			add(py + "-none-" + plat)
		}
	}
	add(cp + "-none-any")
	for _, py := range pys {
		add(py + "-none-any")
	}
	return ts
}

// rank returns the best rank among the wheel's tags, or -1 when none is
// accepted.
func (ts tagSet) rank(w wheelName) int {
	best := -1
	for _, t := range w.tags {
		if r, ok := ts[t]; ok && (best < 0 || r < best) {
			best = r
		}
	}
	return best
}

// Metadata is what the resolver needs from a distribution's core metadata
// (the METADATA file of a wheel, or a PEP 658 .metadata file).
type Metadata struct {
	// Name is the distribution name as published.
	Name string
	// Version is the distribution version.
	Version string
	// RequiresDist are the Requires-Dist entries, PEP 508 strings.
	RequiresDist []string
	// RequiresPython is the Requires-Python specifier, "" if absent.
	RequiresPython string
	// ProvidesExtra are the extras the distribution declares.
	ProvidesExtra []string
}

// parseMetadata reads the header part of a core metadata file (an RFC 822
// style header block; the description body after the first blank line is
// ignored). Hand-written rather than net/textproto because METADATA files in
// the wild have lines textproto rejects, and only five fields matter here.
func parseMetadata(data []byte) (*Metadata, error) {
	var md Metadata
	var key, val string
	flush := func() {
		v := strings.TrimSpace(val)
		switch strings.ToLower(key) {
		case "name":
			md.Name = v
		case "version":
			md.Version = v
		case "requires-dist":
			md.RequiresDist = append(md.RequiresDist, v)
		case "requires-python":
			md.RequiresPython = v
		case "provides-extra":
			md.ProvidesExtra = append(md.ProvidesExtra, v)
		}
		key, val = "", ""
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if key != "" {
				val += " " + strings.TrimSpace(line)
			}
			continue
		}
		flush()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(k), v
	}
	flush()
	if md.Name == "" || md.Version == "" {
		return nil, fmt.Errorf("core metadata without Name or Version")
	}
	return &md, nil
}

// maxMetadataSize bounds a METADATA file read from a wheel or an index.
const maxMetadataSize = 16 << 20

// wheelMetadata reads <name>-<version>.dist-info/METADATA from a wheel.
func wheelMetadata(r io.ReaderAt, size int64, project string) (*Metadata, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("reading wheel: %w", err)
	}
	return metadataFromZip(zr, project)
}

// metadataFromZip reads the METADATA of an opened wheel. When several
// .dist-info directories exist, the one named after project wins.
func metadataFromZip(zr *zip.Reader, project string) (*Metadata, error) {
	var found *zip.File
	for _, f := range zr.File {
		dir, file, ok := strings.Cut(f.Name, "/")
		if !ok || file != "METADATA" || !strings.HasSuffix(dir, ".dist-info") {
			continue
		}
		distName, _, _ := strings.Cut(strings.TrimSuffix(dir, ".dist-info"), "-")
		if found == nil || Normalize(distName) == Normalize(project) {
			found = f
		}
	}
	if found == nil {
		return nil, fmt.Errorf("wheel has no .dist-info/METADATA")
	}
	rc, err := found.Open()
	if err != nil {
		return nil, fmt.Errorf("reading wheel METADATA: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxMetadataSize))
	if err != nil {
		return nil, fmt.Errorf("reading wheel METADATA: %w", err)
	}
	return parseMetadata(data)
}
