// Package permissions turns a sandbox policy into Deno's permission flags.
//
// Python in Pyodide reaches every Deno API through `import js`, so these flags
// are the only real boundary around user code. Everything is denied unless
// the policy names it, prompts are off, and no code can be loaded from
// anywhere but the local files deno was started with.
//
// The package is pure: it never looks at the file system. Paths in a policy
// must already be absolute and resolved for the system deno runs on (on
// macOS, /var/folders/... is really /private/var/folders/...); Policy.Validate
// checks what can be checked from the text alone.
package permissions

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Network says which hosts code may connect to. The zero value allows none.
type Network struct {
	All   bool     // any host but those in Deny
	Hosts []string // host or host:port entries, when not All
	// Deny lists what stays out of reach with All: IPv4 addresses and
	// networks (127.0.0.0/8) and bracketed IPv6 addresses ([::1]). Deno
	// checks them against the addresses a name resolves to, so no name
	// leads around them. They bind the whole process, the bridge's
	// connection included: a TCP bridge must not be in them.
	Deny []string
}

// Bridge is how a worker process's main thread reaches the supervisor.
type Bridge struct {
	// Addr is the host:port that the main thread's WebSocket URL names.
	Addr string
	// Socket is the path of the Unix socket the connection really goes
	// over, if any. Deno opens a Unix socket only with read and write
	// permission on its path, so the process gets both on that one path,
	// and the runner, which never has them, cannot reach the bridge at all.
	Socket string
}

func (n Network) none() bool { return !n.All && len(n.Hosts) == 0 }

// Policy is what a worker process may do.
type Policy struct {
	// Read lists the files and directories the runner may read: the Pyodide
	// package, the snapshot, the wheels of a call. Each must be absolute for
	// the target system and have its symlinks resolved (filepath.EvalSymlinks):
	// deno checks the path a file really has. Validate refuses what deno would
	// read differently, such as a path with a comma.
	Read []string
	// Program is the directory of the worker program. The process reads the
	// runner's source from it to start the runner; the runner itself does not.
	// It follows the same rules as Read.
	Program string
	// Bridge is the supervisor's websocket. Only the process's main thread
	// may reach it, never the runner that runs Python.
	Bridge Bridge
	// Network is what the runner, and so user code, may reach.
	Network Network
	// CodeCache lets deno keep V8's code cache in its DENO_DIR, which it
	// writes whatever --deny-write says: only for a process whose DENO_DIR
	// is its own and thrown away after it, or a trusted one.
	CodeCache bool
}

// Flags returns the flags for `deno run` that enforce p on the whole process.
// The process gets the union of what its main thread and its runner need;
// Runner narrows the runner down to its share. Flags does not check paths:
// call p.Validate first, so that a bad path is a clear error rather than a
// deno that refuses to start.
func Flags(p Policy) []string {
	flags := []string{
		"--no-prompt",
		"--no-remote", // no module from the network, whatever the import permission
		"--no-npm",    // no npm: specifier, so nothing can make deno download and write packages
		"--no-config", // the runtime directory's deno.json is for the trusted install only
		"--no-lock",
		"--unstable-worker-options", // lets the runner have fewer permissions than the process
	}
	if p.Bridge.Socket != "" {
		// Deno's condition for opening the socket: writing to the path
		// itself is refused by the system, since it is no regular file.
		flags = append(flags, "--allow-write="+join([]string{p.Bridge.Socket}))
	} else {
		flags = append(flags, "--deny-write")
	}
	flags = append(flags, "--deny-env", "--deny-run", "--deny-ffi", "--deny-sys", "--deny-import")
	if !p.CodeCache {
		flags = append(flags, "--no-code-cache")
	}
	if read := processReads(p); len(read) > 0 {
		flags = append(flags, "--allow-read="+join(read))
	} else {
		flags = append(flags, "--deny-read")
	}
	hosts := slices.Clone(p.Network.Hosts)
	if p.Bridge.Addr != "" {
		hosts = append(hosts, p.Bridge.Addr)
	}
	if p.Bridge.Socket != "" {
		hosts = append(hosts, "unix:"+p.Bridge.Socket)
	}
	switch {
	case p.Network.All:
		flags = append(flags, "--allow-net")
		if len(p.Network.Deny) > 0 {
			flags = append(flags, "--deny-net="+join(p.Network.Deny))
		}
	case len(hosts) > 0:
		flags = append(flags, "--allow-net="+join(hosts))
	default:
		flags = append(flags, "--deny-net")
	}
	return flags
}

func processReads(p Policy) []string {
	reads := slices.Clone(p.Read)
	if p.Program != "" {
		reads = append([]string{p.Program}, reads...)
	}
	if p.Bridge.Socket != "" {
		reads = append(reads, p.Bridge.Socket)
	}
	return reads
}

// RunnerPermissions is Deno's Worker permission object for the runner.
type RunnerPermissions struct {
	Read   any  `json:"read"` // false or a list of paths
	Net    any  `json:"net"`  // false, true or a list of hosts
	Write  bool `json:"write"`
	Env    bool `json:"env"`
	Run    bool `json:"run"`
	FFI    bool `json:"ffi"`
	Sys    bool `json:"sys"`
	Import bool `json:"import"`
}

// Runner returns the permissions of the Web Worker that runs user code:
// the policy's reads and network, and nothing of the bridge.
func Runner(p Policy) RunnerPermissions {
	r := RunnerPermissions{Read: false, Net: false}
	if len(p.Read) > 0 {
		r.Read = slices.Clone(p.Read)
	}
	switch {
	case p.Network.All:
		r.Net = true
	case !p.Network.none():
		r.Net = slices.Clone(p.Network.Hosts)
	}
	return r
}

// join lists paths or hosts for a flag. Deno splits flag values at every
// comma, so a comma inside an entry would make it two grants. Validate and
// ParseHost refuse such entries; for one that gets here anyway the comma is
// doubled, which some deno versions read as one literal comma and 2.9 reads as
// an empty entry, refusing to start: either way no grant is widened.
func join(entries []string) string {
	escaped := make([]string, len(entries))
	for i, e := range entries {
		escaped[i] = strings.ReplaceAll(e, ",", ",,")
	}
	return strings.Join(escaped, ",")
}

// ParseHost checks one entry of a network allow list and returns it as deno
// takes it: a host name, an IPv4 address or a bracketed IPv6 address, each
// with an optional port (1 to 65535). Names are lower-cased; a bare IPv6
// address gets its brackets, which deno needs. Schemes, paths, wildcards and
// Unix sockets are refused: an allow list names hosts, nothing more.
func ParseHost(entry string) (string, error) {
	s := strings.TrimSpace(entry)
	if s == "" {
		return "", errors.New("empty host")
	}
	if strings.Contains(s, "/") {
		return "", fmt.Errorf("%q: a host such as example.com:443, not a URL or path", entry)
	}
	if addr, err := netip.ParseAddr(s); err == nil && addr.Is6() {
		return ipv6(entry, addr, s)
	}
	if rest, ok := strings.CutPrefix(s, "["); ok {
		inner, port, ok := strings.Cut(rest, "]")
		if !ok {
			return "", fmt.Errorf("%q: no closing ] after the IPv6 address", entry)
		}
		addr, err := netip.ParseAddr(inner)
		if err != nil || !addr.Is6() {
			return "", fmt.Errorf("%q: %q is not an IPv6 address", entry, inner)
		}
		bracketed, err := ipv6(entry, addr, inner)
		if err != nil || port == "" {
			return bracketed, err
		}
		port, ok = strings.CutPrefix(port, ":")
		if !ok {
			return "", fmt.Errorf("%q: expected :PORT after the ]", entry)
		}
		if err := checkPort(entry, port); err != nil {
			return "", err
		}
		return bracketed + ":" + port, nil
	}
	host, port, hasPort := strings.Cut(s, ":")
	if hasPort {
		if err := checkPort(entry, port); err != nil {
			return "", err
		}
	}
	host = strings.ToLower(host)
	if addr, err := netip.ParseAddr(host); err != nil || !addr.Is4() {
		if err := checkHostname(entry, host); err != nil {
			return "", err
		}
	}
	if hasPort {
		return host + ":" + port, nil
	}
	return host, nil
}

// ipv6 brackets addr, which must carry no zone: deno cannot scope a
// permission to an interface.
func ipv6(entry string, addr netip.Addr, text string) (string, error) {
	if addr.Zone() != "" {
		return "", fmt.Errorf("%q: IPv6 zones are not supported", entry)
	}
	return "[" + strings.ToLower(text) + "]", nil
}

func checkPort(entry, port string) error {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 || strings.HasPrefix(port, "+") {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", entry, port)
	}
	return nil
}

// checkHostname accepts DNS names (RFC 1123 labels): anything else would be
// either refused by deno at start or never match a connection.
func checkHostname(entry, host string) error {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("%q: %q is not an IPv4 address", entry, host)
	}
	if len(host) > 253 {
		return fmt.Errorf("%q: host name longer than 253 characters", entry)
	}
	for label := range strings.SplitSeq(host, ".") {
		ok := len(label) > 0 && len(label) <= 63 && label[0] != '-' && label[len(label)-1] != '-'
		for _, r := range label {
			ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
		}
		if !ok {
			return fmt.Errorf("%q: %q is not a host name, an IPv4 address or a bracketed IPv6 address", entry, host)
		}
	}
	return nil
}
