package toolbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Bounds of the message of invalid arguments, which Python code shows.
const (
	maxProblems      = 3   // problems listed
	maxProblemLength = 200 // bytes of each
)

// compileSchema compiles the input schema of a server's tool. The
// compiler loads nothing: a server's schema must not make us read files or
// fetch URLs, so a $ref outside it fails to compile.
func compileSchema(server, tool string, schema json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("decode the input schema: %w", err)
	}
	loc := "mem:///" + url.PathEscape(server) + "/" + url.PathEscape(tool) + ".json"
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("add the input schema: %w", err)
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("compile the input schema: %w", err)
	}
	return compiled, nil
}

// checkArguments decodes args, which must be a JSON object, and validates
// them against schema (none when nil). name is the tool's, for the error,
// which Python code shows: one line, and short.
func checkArguments(name string, schema *jsonschema.Schema, args json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, fmt.Errorf("invalid arguments for %s: %w", name, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("invalid arguments for %s: want a JSON object, got %s", name, jsonType(v))
	}
	if schema == nil {
		return obj, nil
	}
	if err := schema.Validate(obj); err != nil {
		return nil, fmt.Errorf("invalid arguments for %s: %s", name, problems(err))
	}
	return obj, nil
}

// problems is the validator's error on one line: the leaves of its tree,
// which say what is wrong where (the inner nodes only say that a subschema
// failed), in a stable order, the first few of them.
func problems(err error) string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return oneLine(err.Error(), maxProblemLength)
	}
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			// A leaf's Error is "at '/a': got string, want number"; the
			// root's location, '', says nothing.
			out = append(out, oneLine(strings.TrimPrefix(e.Error(), "at '': "), maxProblemLength))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	slices.Sort(out)
	out = slices.Compact(out)
	if n := len(out); n > maxProblems {
		out = append(out[:maxProblems], fmt.Sprintf("and %d more", n-maxProblems))
	}
	return strings.Join(out, "; ")
}

// oneLine folds s onto one line and cuts it to at most limit bytes.
func oneLine(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit-len("…")], "") + "…"
}

// jsonType names the JSON type of a value that jsonschema.UnmarshalJSON
// decoded.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}
