package config

import (
	"bytes"
	_ "embed" // the template of docs/FLAGS.md
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/spf13/pflag"
)

//go:generate go run ./genflags ../../../../docs/FLAGS.md

// flagsTemplate is docs/FLAGS.md around its tables: the prose that explains
// flags at more length than their usage text can.
//
//go:embed flags.md.tmpl
var flagsTemplate string

// flagDocGOOS is the platform whose defaults docs/FLAGS.md shows, so that
// the file is the same whichever machine generates or checks it; the
// template says what differs elsewhere.
const flagDocGOOS = "linux"

// flagGroup is one table of docs/FLAGS.md: a heading and its flags, in the
// order of the table.
type flagGroup struct {
	title string
	flags []string
}

// flagGroups sorts every flag into one table by what it is about. A flag
// that no group names, or a name that is no flag, fails FlagReference, so a
// new flag cannot be left out of the reference.
func flagGroups() []flagGroup {
	return []flagGroup{
		{"The server", []string{"port", "host", "return-mode", "tool-schema", "log-level", "verbose", "version", "help"}},
		{"Workers and the limits of a call", []string{"workers", "warm", "queue", "queue-timeout", "max-calls-per-principal", "timeout", "grace", "memory-limit", "output-limit", "code-limit", "shutdown-timeout"}},
		{"Network of the code", []string{"disable-networking", "allow-net", "allow-private-net"}},
		{"Packages", []string{"deps", "index-url", "pyodide-index-url", "offline", "mirror"}},
		{"Python sessions", []string{"sessions", "session-idle", "max-sessions", "max-sessions-per-principal", "session-idle-cpu"}},
		{"Tasks", []string{"tasks", "tasks-per-principal", "task-retention", "task-results-limit", "max-task-results"}},
		{"Files, figures and mounts", []string{"files", "files-limit", "files-ttl", "files-store-limit", "max-files", "files-store-limit-per-principal", "max-files-per-principal", "image-limit", "mount", "mount-limit", "mount-files"}},
		{"The HTTP front end", []string{"request-limit", "read-timeout", "max-connections", "max-mcp-sessions", "max-mcp-sessions-per-principal", "mcp-session-idle", "allow-origin"}},
		{"Authentication and TLS", []string{"oauth-issuer", "oauth-audience", "oauth-scopes", "auth-token-file", "public-url", "metrics-auth", "tls-cert", "tls-key"}},
		{"Code mode", []string{"tools-config", "tools-allow", "tool-calls", "tool-result-limit"}},
		{"Asking the model and the person", []string{"sampling", "elicitation", "llm-url", "llm-model", "llm-key-file", "llm-requests", "llm-batch", "llm-concurrency", "llm-prompt-limit", "llm-answer-limit", "llm-max-tokens", "llm-wait", "park-timeout", "max-parked-calls-per-principal"}},
		{"Deno and the cache", []string{"deno", "cache-dir", "cache-limit", "prune"}},
	}
}

// FlagReference returns docs/FLAGS.md as `make docs` writes it: every flag
// of the program with its default and usage text, grouped, from the flag
// set itself, so that the reference cannot drift from the program.
func FlagReference() ([]byte, error) {
	var v flagValues
	tables, err := flagTables(newFlagSet(&v, flagDocGOOS), flagGroups())
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("FLAGS.md").Parse(flagsTemplate)
	if err != nil {
		return nil, fmt.Errorf("the template of FLAGS.md: %w", err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, struct{ Tables string }{tables}); err != nil {
		return nil, fmt.Errorf("the template of FLAGS.md: %w", err)
	}
	return out.Bytes(), nil
}

// flagTables renders groups as Markdown tables of the flags of fs, and
// fails if the groups do not name each flag exactly once.
func flagTables(fs *pflag.FlagSet, groups []flagGroup) (string, error) {
	seen := map[string]bool{}
	var b strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&b, "## %s\n\n| flag | default | meaning |\n| --- | --- | --- |\n", g.title)
		for _, name := range g.flags {
			f := fs.Lookup(name)
			if f == nil {
				return "", fmt.Errorf("group %q names --%s, which is no flag", g.title, name)
			}
			if seen[name] {
				return "", fmt.Errorf("--%s is in more than one group", name)
			}
			seen[name] = true
			b.WriteString(flagRow(f))
		}
		b.WriteString("\n")
	}
	var missing []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !seen[f.Name] {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return "", errors.New("no group of FLAGS.md names " + strings.Join(missing, ", ") + ": add it to flagGroups")
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// flagRow is f's row: its name and value, its default, and its usage. A
// default that the usage explains, "(default: ...)" at its end, moves to
// the default column; a zero default, which pflag's own help leaves out,
// is left out here too.
func flagRow(f *pflag.Flag) string {
	name := "`--" + f.Name
	if f.Shorthand != "" {
		name = "`-" + f.Shorthand + "`, " + name
	}
	valueName, usage := pflag.UnquoteUsage(f)
	if valueName != "" {
		name += " " + valueName
	}
	name += "`"
	def := ""
	if !slices.Contains([]string{"", "0", "false", "[]"}, f.DefValue) {
		def = "`" + f.DefValue + "`"
	}
	if rest, explained, ok := strings.Cut(usage, " (default: "); ok && strings.HasSuffix(explained, ")") {
		usage, def = rest, strings.TrimSuffix(explained, ")")
	}
	return fmt.Sprintf("| %s | %s | %s |\n", cell(name), cell(def), cell(usage))
}

// cell escapes s for a cell of a Markdown table.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
