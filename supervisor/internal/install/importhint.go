package install

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// missingModule matches a traceback that ends in a top-level module that
// could not be found. A dotted name means its parent was imported: the
// submodule does not exist, and no package is missing.
var missingModule = regexp.MustCompile(`(?:^|\n)ModuleNotFoundError: No module named '([A-Za-z_][A-Za-z0-9_]*)'\n*$`)

// MissingPackageNote is the line added to the error of a run that failed
// on an import no package was installed for, saying how to ask for one, or
// "" when there is nothing to say. The server installs packages for the
// imports it finds in the code (or, with a PEP 723 block, what the block
// names); an import inside a package's function (networkx imports numpy in
// pagerank) or one built at run time is not among them, and the code is
// not run again to find out.
//
// There is no note when the code's own import statements name the module
// (the server looked for it, and its progress said why nothing was
// installed), when the package is asked for already (it does not provide
// the module), and when no package name can be given for the module.
// errText is the run's error; it comes from user code and may be forged,
// which costs nothing but a wrong hint: the name is a Python identifier.
func (in *Installer) MissingPackageNote(errText, code string, script []string, fromScript bool) string {
	m := missingModule.FindStringSubmatch(errText)
	if m == nil {
		return ""
	}
	module := m[1]
	if in.made[module] {
		return ""
	}
	inf := packages.InferImports([]string{module}, nil, in.imports)
	if len(inf) != 1 {
		return ""
	}
	pkg := inf[0].Package
	asked := append(slices.Clone(*in.deps.Load()), script...)
	for _, text := range asked {
		if r, err := packages.ParseRequirement(text); err == nil && packages.Normalize(r.Name) == packages.Normalize(pkg) {
			return ""
		}
	}
	if fromScript {
		return fmt.Sprintf(`note: nothing was installed for module '%s': with a PEP 723 block the server installs only what the block names; add %q to its dependencies, or start the server with --deps %s`,
			module, pkg, pkg)
	}
	if importsModule(code, module) {
		return ""
	}
	return fmt.Sprintf(`note: nothing was installed for module '%s': the server installs packages for the imports it finds in the code, and this import is not among them (it is inside a package, or made at run time); `+
		`ask for the package in a PEP 723 block (# /// script, # dependencies = [%q], # ///) or start the server with --deps %s`,
		module, pkg, pkg)
}

// importsModule reports whether an import statement of code names module:
// a rough look at the text, which at worst leaves out a note.
func importsModule(code, module string) bool {
	re := regexp.MustCompile(`(?m)(?:^|;)[ \t]*(?:import|from)[ \t][^\n]*\b` + regexp.QuoteMeta(module) + `\b`)
	return re.MatchString(code)
}

// WithNote adds note as the error's last line.
func WithNote(errText, note string) string {
	if note == "" {
		return errText
	}
	return strings.TrimRight(errText, "\n") + "\n" + note + "\n"
}
