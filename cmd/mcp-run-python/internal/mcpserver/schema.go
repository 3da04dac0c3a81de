package mcpserver

import "fmt"

// ToolSchema is whose tools/list the server reproduces (--tool-schema).
type ToolSchema string

// The tool schemas. JSR is upstream's last JSR release, which the drop-in
// keeps byte for byte; PyPI is its last PyPI release (0.0.22), whose
// run_python_code also lists global_variables and a title.
const (
	SchemaJSR  ToolSchema = "jsr"
	SchemaPyPI ToolSchema = "pypi"
)

// ParseToolSchema reads a --tool-schema value.
func ParseToolSchema(s string) (ToolSchema, error) {
	switch t := ToolSchema(s); t {
	case SchemaJSR, SchemaPyPI:
		return t, nil
	}
	return "", fmt.Errorf("unknown tool schema %q: want jsr (upstream's JSR release, the default) or pypi (its PyPI release 0.0.22)", s)
}
