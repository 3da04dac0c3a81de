package packages

import (
	"archive/zip"
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
// the wild have lines textproto rejects, and only five fields matter here:
// the lines of the others are skipped, and those of these five are joined
// once, so that a hostile file of continuation lines costs a linear pass
// (joining them one by one took 83 s for 768 KiB, hours for 16 MiB).
func parseMetadata(data []byte) (*Metadata, error) {
	var md Metadata
	var key string
	var parts []string
	flush := func() {
		v := strings.TrimSpace(strings.Join(parts, " "))
		switch key {
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
		key, parts = "", parts[:0]
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if key != "" {
				parts = append(parts, strings.TrimSpace(line))
			}
			continue
		}
		flush()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k = strings.ToLower(strings.TrimSpace(k)); k {
		case "name", "version", "requires-dist", "requires-python", "provides-extra":
			key, parts = k, append(parts, v)
		}
	}
	flush()
	switch {
	case md.Name == "" || md.Version == "":
		return nil, fmt.Errorf("core metadata without Name or Version")
	case len(md.RequiresDist)+len(md.ProvidesExtra) > maxMetadataEntries:
		return nil, fmt.Errorf("core metadata with more than %d Requires-Dist and Provides-Extra entries", maxMetadataEntries)
	}
	return &md, nil
}

// maxMetadataEntries bounds the requirements and extras one core metadata
// file may declare: each requirement is a project the resolver looks up,
// and a package that needs thousands is no package a sandbox imports.
const maxMetadataEntries = 10_000

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
	data, err := io.ReadAll(io.LimitReader(rc, maxMetadataSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading wheel METADATA: %w", err)
	}
	if len(data) > maxMetadataSize {
		return nil, fmt.Errorf("wheel METADATA is larger than %d bytes", maxMetadataSize)
	}
	return parseMetadata(data)
}
