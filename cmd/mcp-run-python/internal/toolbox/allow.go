package toolbox

import (
	"fmt"
	"slices"
	"strings"
)

// Allow is the --tools-allow filter: the tools code may call. Its zero
// value allows every tool.
type Allow struct {
	tools   map[string]bool // "server.tool" entries
	servers map[string]bool // the servers of "server.*" entries
}

// ParseAllow parses a comma-separated list of server.tool and server.*
// entries; an empty list allows every tool.
func ParseAllow(s string) (Allow, error) {
	var a Allow
	if strings.TrimSpace(s) == "" {
		return a, nil
	}
	a.tools, a.servers = make(map[string]bool), make(map[string]bool)
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimSpace(e)
		// Entries are kept whole rather than split at a dot, since server
		// and tool names may both contain dots.
		i := strings.Index(e, ".")
		switch {
		case i <= 0 || i == len(e)-1:
			return Allow{}, fmt.Errorf("%q is not server.tool or server.*", e)
		case strings.HasSuffix(e, ".*"):
			a.servers[strings.TrimSuffix(e, ".*")] = true
		default:
			a.tools[e] = true
		}
	}
	return a, nil
}

// Allows reports whether code may call the tool of server.
func (a Allow) Allows(server, tool string) bool {
	return a.tools == nil || a.servers[server] || a.tools[server+"."+tool]
}

// unknown returns the entries of a that name no server of cfg, likely
// typos, sorted.
func (a Allow) unknown(cfg Config) []string {
	var out []string
	for server := range a.servers {
		if !slices.ContainsFunc(cfg.Servers, func(s ServerConfig) bool { return s.Name == server }) {
			out = append(out, server+".*")
		}
	}
	for tool := range a.tools {
		if !slices.ContainsFunc(cfg.Servers, func(s ServerConfig) bool { return strings.HasPrefix(tool, s.Name+".") }) {
			out = append(out, tool)
		}
	}
	slices.Sort(out)
	return out
}
