package packages

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Package types of a Pyodide lock file entry.
const (
	// TypePackage is an ordinary Python package (a wheel, or a zip of a
	// package's unvendored tests).
	TypePackage = "package"
	// TypeCPythonModule is a standard-library module Pyodide ships
	// separately (ssl, sqlite3, ... in older Pyodide releases).
	TypeCPythonModule = "cpython_module"
	// TypeSharedLibrary is a zip of shared libraries (install_dir "dynlib")
	// that other packages load at run time.
	TypeSharedLibrary = "shared_library"
)

// Lock is a parsed pyodide-lock.json: the packages built for one Pyodide
// release, each in exactly one version.
type Lock struct {
	// Info describes the Pyodide build the lock belongs to.
	Info LockInfo
	// Packages maps the normalized package name to its entry.
	Packages map[string]*LockPackage
}

// LockInfo is the "info" object of a lock file.
type LockInfo struct {
	// Arch is the architecture, e.g. "wasm32".
	Arch string `json:"arch"`
	// Platform is the Emscripten platform, e.g. "emscripten_5_0_3".
	Platform string `json:"platform"`
	// Python is CPython's full version, e.g. "3.14.2".
	Python string `json:"python"`
	// ABIVersion is Pyodide's ABI version, e.g. "2026_0" (newer locks).
	ABIVersion string `json:"abi_version"`
	// Version is Pyodide's version (older locks).
	Version string `json:"version"`
}

// LockPackage is one entry of a lock file's "packages".
type LockPackage struct {
	// Name is the name as the lock file spells it ("pydantic_core").
	Name string `json:"name"`
	// Version is the one version Pyodide ships.
	Version string `json:"version"`
	// FileName is the wheel or zip, relative to the package host.
	FileName string `json:"file_name"`
	// SHA256 is the file's hex sha256.
	SHA256 string `json:"sha256"`
	// Depends names other lock packages this one needs (shared libraries
	// too), not normalized.
	Depends []string `json:"depends"`
	// Imports are the top-level import names the package provides.
	Imports []string `json:"imports"`
	// PackageType is TypePackage, TypeCPythonModule or TypeSharedLibrary.
	PackageType string `json:"package_type"`
	// InstallDir is where Pyodide unpacks it: "site", "stdlib" or "dynlib".
	InstallDir string `json:"install_dir"`
	// UnvendoredTests says the package's tests are a separate
	// "<name>-tests" entry.
	UnvendoredTests bool `json:"unvendored_tests"`
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseLock parses the contents of a pyodide-lock.json and checks that
// every package names a version, a plain file name and a sha256.
func ParseLock(data []byte) (*Lock, error) {
	var raw struct {
		Info     LockInfo                `json:"info"`
		Packages map[string]*LockPackage `json:"packages"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("pyodide lock file: %w", err)
	}
	if raw.Info.Python == "" {
		return nil, fmt.Errorf("pyodide lock file: info.python is missing")
	}
	l := &Lock{Info: raw.Info, Packages: make(map[string]*LockPackage, len(raw.Packages))}
	for key, p := range raw.Packages {
		if p == nil {
			return nil, fmt.Errorf("pyodide lock file: package %q is null", key)
		}
		if p.Name == "" {
			p.Name = key
		}
		p.SHA256 = strings.ToLower(p.SHA256)
		switch {
		case p.Version == "":
			return nil, fmt.Errorf("pyodide lock file: package %q has no version", key)
		case p.FileName == "" || strings.ContainsAny(p.FileName, `/\`) || p.FileName == "." || p.FileName == "..":
			return nil, fmt.Errorf("pyodide lock file: package %q has a bad file name %q", key, p.FileName)
		case !sha256RE.MatchString(p.SHA256):
			return nil, fmt.Errorf("pyodide lock file: package %q has a bad sha256 %q", key, p.SHA256)
		}
		if p.PackageType == "" {
			p.PackageType = TypePackage
		}
		if p.InstallDir == "" {
			p.InstallDir = "site"
		}
		l.Packages[Normalize(key)] = p
	}
	return l, nil
}

// ReadLock reads and parses a pyodide-lock.json file.
func ReadLock(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading pyodide lock file: %w", err)
	}
	return ParseLock(data)
}

// Package looks a package up by any spelling of its name.
func (l *Lock) Package(name string) (*LockPackage, bool) {
	p, ok := l.Packages[Normalize(name)]
	return p, ok
}

// ImportTable maps every import name the lock's packages provide to the
// (normalized) package name, the table Pyodide's loadPackagesFromImports
// uses. When two packages claim one import, the later in name order wins,
// as in Pyodide.
func (l *Lock) ImportTable() map[string]string {
	keys := make([]string, 0, len(l.Packages))
	for k := range l.Packages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	table := map[string]string{}
	for _, k := range keys {
		for _, imp := range l.Packages[k].Imports {
			table[imp] = k
		}
	}
	return table
}

// PythonVersion returns "3.14" for a lock of CPython 3.14.2.
func (l *Lock) PythonVersion() string { return majorMinor(l.Info.Python) }

// Environment returns the PEP 508 marker environment of this Pyodide.
func (l *Lock) Environment() Environment {
	release := strings.ReplaceAll(strings.TrimPrefix(l.Info.Platform, "emscripten_"), "_", ".")
	return PyodideEnvironment(l.Info.Python, release)
}

// PlatformTags returns the wheel platform tags this Pyodide accepts besides
// "any": every platform tag of the lock's own wheels (e.g.
// "pyemscripten_2026_0_wasm32"), then the ones derived from info:
// "<platform>_<arch>" ("emscripten_5_0_3_wasm32") and, with an ABI version,
// "pyemscripten_<abi>_<arch>" and "pyodide_<abi>_<arch>".
func (l *Lock) PlatformTags() []string {
	var tags []string
	add := func(t string) {
		if t != "" && t != "any" && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	keys := make([]string, 0, len(l.Packages))
	for k := range l.Packages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if w, ok := parseWheelName(l.Packages[k].FileName); ok {
			for _, t := range w.tags {
				add(t[strings.LastIndex(t, "-")+1:])
			}
		}
	}
	arch := l.Info.Arch
	if arch == "" {
		arch = "wasm32"
	}
	withArch := func(p string) string {
		if strings.HasSuffix(p, "_"+arch) {
			return p
		}
		return p + "_" + arch
	}
	if l.Info.Platform != "" {
		add(withArch(l.Info.Platform))
	}
	if l.Info.ABIVersion != "" {
		add("pyemscripten_" + l.Info.ABIVersion + "_" + arch)
		add("pyodide_" + l.Info.ABIVersion + "_" + arch)
	}
	return tags
}
