package packages

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// scriptBlockRE is the reference regular expression of PEP 723
// ("Inline script metadata"), unchanged. RE2 gives it the same meaning as
// Python's re module: multi-line mode, "." stops at a newline, and "\s"
// after "$" eats the newline.
var scriptBlockRE = regexp.MustCompile(`(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$`)

// FromCode returns the dependencies declared by the PEP 723 "script" block
// of a Python source, as written there (PEP 508 requirement strings).
//
// fromScript reports whether the code has a script block at all: when it
// does, its dependencies (possibly none) are the whole truth and imports are
// not inspected; when it does not, the caller infers requirements from
// imports with [InferImports].
//
// A requires-python in the block is returned as one more requirement,
// "python" with its specifier (e.g. "python>=3.12"), which [Resolver.Resolve]
// refuses when Pyodide's Python does not satisfy it.
//
// It is an error for the code to have more than one script block, for the
// block to be invalid TOML, or for "dependencies" to be anything but a list
// of strings. Blocks of other types (e.g. "# /// pyproject") are ignored, as
// PEP 723 asks.
func FromCode(code string) (reqs []string, fromScript bool, err error) {
	typeIdx := scriptBlockRE.SubexpIndex("type")
	contentIdx := scriptBlockRE.SubexpIndex("content")
	var blocks []string
	for _, m := range scriptBlockRE.FindAllStringSubmatch(code, -1) {
		if m[typeIdx] == "script" {
			blocks = append(blocks, m[contentIdx])
		}
	}
	switch len(blocks) {
	case 0:
		return nil, false, nil
	case 1:
	default:
		return nil, true, fmt.Errorf("PEP 723: %d script blocks found, at most one is allowed", len(blocks))
	}

	// Strip the comment prefix of each line: "# " or, for an empty line, "#".
	var b strings.Builder
	for _, line := range strings.SplitAfter(blocks[0], "\n") {
		if strings.HasPrefix(line, "# ") {
			b.WriteString(line[2:])
		} else if strings.HasPrefix(line, "#") {
			b.WriteString(line[1:])
		}
	}
	var meta map[string]any
	if _, err := toml.Decode(b.String(), &meta); err != nil {
		return nil, true, fmt.Errorf("PEP 723 script block: invalid TOML: %w", err)
	}
	// requires-python becomes a requirement on the virtual package
	// "python", which the resolver checks against Pyodide's Python.
	var python []string
	if rp, ok := meta["requires-python"]; ok {
		text, ok := rp.(string)
		if !ok {
			return nil, true, fmt.Errorf("PEP 723 script block: requires-python must be a string, not %s", tomlTypeName(rp))
		}
		spec, err := ParseSpecifier(text)
		if err != nil {
			return nil, true, fmt.Errorf("PEP 723 script block: requires-python %q: %w", text, err)
		}
		if !spec.IsEmpty() {
			python = []string{pythonPackage + spec.String()}
		}
	}
	raw, ok := meta["dependencies"]
	if !ok {
		return python, true, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, true, fmt.Errorf("PEP 723 script block: dependencies must be a list of strings, not %s", tomlTypeName(raw))
	}
	reqs = make([]string, 0, len(list))
	for i, v := range list {
		s, ok := v.(string)
		if !ok {
			return nil, true, fmt.Errorf("PEP 723 script block: dependencies[%d] must be a string, not %s", i, tomlTypeName(v))
		}
		reqs = append(reqs, s)
	}
	return append(reqs, python...), true, nil
}

// WithoutPython returns reqs without the requirement on Python that
// FromCode adds for requires-python: results list what the script asked to
// install, as upstream's did.
func WithoutPython(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		// FromCode writes it as "python" and its specifier, which starts
		// with an operator: python-dateutil is a package.
		if rest, ok := strings.CutPrefix(r, pythonPackage); ok && rest != "" && strings.ContainsRune("<>=!~", rune(rest[0])) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// tomlTypeName names the TOML type of a decoded value for error messages.
func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

// Inferred is a package to install because code imports a module.
type Inferred struct {
	// Import is the import name, e.g. "yaml" or "google.protobuf".
	Import string
	// Package is the project that provides it, e.g. "PyYAML".
	Package string
	// Builtin: Pyodide's lock file names the package (its import table).
	Builtin bool
	// Guessed: no table names the project; it is the import name itself.
	Guessed bool
}

// Module is the top-level module the import needs ("google" for
// "google.protobuf").
func (i Inferred) Module() string {
	m, _, _ := strings.Cut(i.Import, ".")
	return m
}

// InferImports maps the imports of a Python source (module names as
// pyodide.code.find_imports reports them, parents included) to the packages
// to install:
//
//   - names importable already (importable returns true; nil means none is)
//     and relative imports are skipped;
//   - a name in table (import name → package name, see [Lock.ImportTable])
//     maps to that package: Pyodide's built-ins win;
//   - else a well-known import name that differs from its project maps to
//     that project (see [KnownImport]);
//   - any other name without a dot stands for a package of the same name
//     (Guessed), unless a dotted name under it is in a table (the
//     "google" of "google.protobuf" is a namespace, not a project);
//     dotted names no table knows are skipped.
//
// The result keeps the order in which names are first seen and has no
// duplicates (compared by normalized package name).
func InferImports(imports []string, importable func(string) bool, table map[string]string) []Inferred {
	lookup := func(imp string) (pkg string, builtin, ok bool) {
		if pkg, ok := table[imp]; ok {
			return pkg, true, true
		}
		pkg, ok = KnownImport(imp)
		return pkg, false, ok
	}
	// Parents of dotted names a table knows are namespaces.
	namespaces := map[string]bool{}
	for _, imp := range imports {
		imp = strings.TrimSpace(imp)
		if _, _, ok := lookup(imp); ok && strings.Contains(imp, ".") {
			for i := strings.LastIndex(imp, "."); i > 0; i = strings.LastIndex(imp[:i], ".") {
				namespaces[imp[:i]] = true
			}
		}
	}
	var out []Inferred
	seen := map[string]bool{}
	for _, imp := range imports {
		imp = strings.TrimSpace(imp)
		if imp == "" || strings.HasPrefix(imp, ".") {
			continue
		}
		if importable != nil && importable(imp) {
			continue
		}
		inf := Inferred{Import: imp}
		var ok bool
		if inf.Package, inf.Builtin, ok = lookup(imp); !ok {
			if strings.Contains(imp, ".") || namespaces[imp] {
				continue
			}
			inf.Package, inf.Guessed = imp, true
		}
		key := Normalize(inf.Package)
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, inf)
	}
	return out
}
