package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/service"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
)

// serviceCommand is the word before the service actions on the command line.
const serviceCommand = "service"

// serviceUsage is the usage of `mcp-run-python service`.
const serviceUsage = `Usage:
  mcp-run-python service install [--user] [--print] MODE [FLAGS]
  mcp-run-python service uninstall|start|stop|status [--user]

install registers the server with the system's service manager (systemd,
launchd, the Windows Service Control Manager) to run MODE (streamable_http,
streamable_http_stateless or sse) with FLAGS, as mcp-run-python -h lists
them, and the absolute path of deno. --user installs into your own service
manager (a systemd user unit, a launchd agent) instead of the system's.
--print writes the unit that install would write to stdout and installs
nothing.
`

// serviceHost is what the service command reads of the system it runs on;
// tests replace it.
type serviceHost struct {
	goos       string
	executable func() (string, error)
	env        config.Environment
	// tmpDirs are what systemd's PrivateTmp=yes gives the unit empty ones
	// of its own for: a file there is not the service's.
	tmpDirs []string
}

// osServiceHost is the system the program runs on.
func osServiceHost(env config.Environment) serviceHost {
	return serviceHost{goos: runtime.GOOS, executable: os.Executable, env: env, tmpDirs: []string{"/tmp", "/var/tmp"}}
}

// runService runs `mcp-run-python service ARGS` and returns the exit status.
func runService(args []string, std streams, host serviceHost) int {
	action, spec, printOnly, err := parseService(args, host)
	var usage *config.UsageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(std.err, "mcp-run-python service: %v\nRun 'mcp-run-python service --help' for its usage.\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(std.err, "mcp-run-python service: %v\n", err)
		return exitFailure
	case action == "":
		fmt.Fprint(std.out, serviceUsage)
		return exitOK
	case printOnly:
		unit, err := service.Render(spec)
		if err != nil {
			fmt.Fprintf(std.err, "mcp-run-python service: %v\n", err)
			return exitFailure
		}
		where := unit.Path
		if where == "" {
			where = "the Service Control Manager"
		}
		// The note on stderr keeps stdout the file itself.
		fmt.Fprintf(std.err, "mcp-run-python service: install would write to %s:\n", where)
		fmt.Fprint(std.out, unit.Text)
		return exitOK
	}
	if err := service.Control(spec, action, std.out); err != nil {
		fmt.Fprintf(std.err, "mcp-run-python service: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// parseService parses the service command's arguments into its action and
// the service's spec, resolved on host. The empty action asks for help.
func parseService(args []string, host serviceHost) (action string, spec service.Spec, printOnly bool, err error) {
	manager, ok := service.ManagerFor(host.goos)
	if !ok {
		return "", spec, false, fmt.Errorf("no supported service manager on %s", host.goos)
	}
	spec.Manager = manager
	if len(args) == 0 {
		return "", spec, false, &config.UsageError{Err: errors.New("no action given")}
	}
	action = args[0]
	var serverArgs []string
	for _, a := range args[1:] {
		switch a {
		case "--user":
			spec.User = true
		case "--print":
			printOnly = true
		case "-h", "--help":
			return "", spec, false, nil
		default:
			serverArgs = append(serverArgs, a)
		}
	}
	switch action {
	case "-h", "--help", "help":
		return "", spec, false, nil
	case service.ActionInstall:
	case service.ActionUninstall, service.ActionStart, service.ActionStop, service.ActionStatus:
		if printOnly || len(serverArgs) > 0 {
			return "", spec, false, &config.UsageError{Err: fmt.Errorf("%s takes only --user", action)}
		}
		return action, spec, false, nil
	default:
		return "", spec, false, &config.UsageError{Err: fmt.Errorf("unknown action %q", action)}
	}
	if spec, err = installSpec(spec, serverArgs, host); err != nil {
		return "", spec, false, err
	}
	return action, spec, printOnly, nil
}

// serviceEnv is the environment that decides the service's arguments: only
// where deno is. The service does not inherit the other MCP_RUN_PYTHON_*
// variables of the shell that installs it, so they must not make its flags
// look valid here.
func serviceEnv(env config.Environment) config.Environment {
	lookup := env.LookupEnv
	env.LookupEnv = func(key string) (string, bool) {
		if key == "MCP_RUN_PYTHON_DENO" || key == "DENO_INSTALL" {
			return lookup(key)
		}
		return "", false
	}
	return env
}

// installSpec completes spec with the server's command line: serverArgs,
// checked as the server will check them, with --deno replaced by the
// absolute path of the deno that the server would run here.
func installSpec(spec service.Spec, serverArgs []string, host serviceHost) (service.Spec, error) {
	env := serviceEnv(host.env)
	cfg, _, err := configure(serverArgs, env)
	if err != nil {
		return spec, err
	}
	switch cfg.Mode {
	case config.ModeStreamableHTTP, config.ModeStreamableHTTPStateless, config.ModeSSE:
	default:
		// A service has no client on its standard streams.
		return spec, &config.UsageError{Err: fmt.Errorf("a service serves HTTP: streamable_http, streamable_http_stateless or sse, not %q", cfg.Mode)}
	}
	deno, err := serviceDeno(cfg.Supervisor.Deno, spec, host)
	if err != nil {
		return spec, err
	}
	exe, err := host.executable()
	if err == nil {
		exe, err = filepath.Abs(exe)
	}
	if err != nil {
		return spec, fmt.Errorf("find mcp-run-python itself: %w", err)
	}
	if err := hiddenFromService(exe, spec, host); err != nil {
		return spec, fmt.Errorf("mcp-run-python %w: install it where every user can run it "+
			"(sudo install -m 755 %s /usr/local/bin/) and run that one", err, exe)
	}
	if serverArgs, err = servicePaths(serverArgs, spec, host); err != nil {
		return spec, err
	}
	if spec.Home, err = env.UserHomeDir(); err != nil && spec.User {
		return spec, fmt.Errorf("find your home directory: %w", err)
	}
	spec.Executable = exe
	// The mode first, as in the documentation's command lines.
	rest := dropFlag(serverArgs, "deno")
	mode := slices.IndexFunc(rest, func(a string) bool { return config.Mode(strings.ReplaceAll(a, "-", "_")) == cfg.Mode })
	if mode < 0 {
		return spec, fmt.Errorf("mode %s not found in %q", cfg.Mode, serverArgs)
	}
	spec.Args = slices.Concat([]string{string(cfg.Mode)}, slices.Delete(rest, mode, mode+1), []string{"--deno", deno})
	if cache := flagTokens(serverArgs, "cache-dir"); len(cache) > 0 {
		if spec.Manager == service.Systemd && !spec.User {
			// Its dynamic user, a new uid at each start, can write only
			// the directories that systemd makes for it.
			return spec, &config.UsageError{Err: errors.New("the system unit keeps its cache in /var/cache/mcp-run-python: drop --cache-dir")}
		}
		// The service's working directory is not the shell's.
		if !filepath.IsAbs(cfg.Supervisor.CacheDir) {
			return spec, &config.UsageError{Err: fmt.Errorf("--cache-dir %s: a service needs an absolute path", cfg.Supervisor.CacheDir)}
		}
		spec.CacheDir = filepath.Clean(cfg.Supervisor.CacheDir)
		if err := hiddenFromService(spec.CacheDir, spec, host); err != nil {
			return spec, &config.UsageError{Err: fmt.Errorf("--cache-dir %w", err)}
		}
	}
	spec.WarmupArgs = slices.Concat([]string{string(config.ModeWarmup), "--deno", deno}, flagTokens(serverArgs, "cache-dir"))
	// What the service will run must parse as what was checked above.
	for _, args := range [][]string{spec.Args, spec.WarmupArgs} {
		if _, _, err := configure(args, env); err != nil {
			return spec, fmt.Errorf("the service's command line %q: %w", args, err)
		}
	}
	return spec, nil
}

// serviceDeno returns the absolute path of deno, the deno the server would
// run, after checking that the service's user can run it.
func serviceDeno(deno string, spec service.Spec, host serviceHost) (string, error) {
	if !filepath.IsAbs(deno) && !strings.ContainsAny(deno, `/\`) {
		return "", fmt.Errorf("deno not found (on PATH, nor in ~/.deno/bin): install it, or name it with --deno")
	}
	abs, err := filepath.Abs(deno)
	if err != nil {
		return "", fmt.Errorf("deno %s: %w", deno, err)
	}
	info, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", fmt.Errorf("deno: %w", err)
	case !info.Mode().IsRegular():
		return "", fmt.Errorf("deno %s is not a file", abs)
	case host.goos != "windows" && info.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("deno %s is not executable", abs)
	}
	if err := hiddenFromService(abs, spec, host); err != nil {
		real, evalErr := filepath.EvalSymlinks(abs)
		if evalErr != nil {
			real = abs
		}
		return "", fmt.Errorf("deno %w: copy it where every user can run it (sudo install -m 755 %s /usr/local/bin/deno) "+
			"and run this again with --deno /usr/local/bin/deno, or install a user service with --user", err, real)
	}
	return abs, nil
}

// hiddenFromService reports why the service of spec would not see the
// file at path, or nil. systemd's units (PrivateTmp=yes) get a /tmp and a
// /var/tmp of their own, and the system unit's dynamic user sees no home
// directory (ProtectHome=yes), nor could read another user's.
func hiddenFromService(path string, spec service.Spec, host serviceHost) error {
	if spec.Manager != service.Systemd {
		return nil
	}
	paths := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for _, tmp := range host.tmpDirs {
			if within(p, tmp) {
				return fmt.Errorf("%s is in %s, which the unit's PrivateTmp=yes replaces with an empty one of its own", p, tmp)
			}
		}
		if !spec.User && underHome(p) {
			return fmt.Errorf("%s is in a home directory, which the service's user cannot read", p)
		}
	}
	return nil
}

// pathFlag returns how to make the host paths in a value of flag --name
// absolute, for the flags of a service's command line that name files or
// folders on this host; nil for the others.
func pathFlag(name string) func(value string, abs func(string) (string, error)) (string, error) {
	switch name {
	case "auth-token-file", "tls-cert", "tls-key", "tools-config":
		return absFile
	case "index-url", "pyodide-index-url":
		return absLocation
	case "mount":
		return absMounts
	}
	return nil
}

// absFile is a file flag's value made absolute.
func absFile(v string, abs func(string) (string, error)) (string, error) {
	if v == "" {
		return v, nil
	}
	return abs(v)
}

// absLocation is an index's location with a local directory made
// absolute; URLs stay as they are.
func absLocation(v string, abs func(string) (string, error)) (string, error) {
	if v == "" || strings.Contains(v, "://") {
		return v, nil
	}
	return abs(v)
}

// absMounts is a --mount value, one a line, with each HOST made absolute.
func absMounts(v string, abs func(string) (string, error)) (string, error) {
	var lines []string
	for _, line := range config.SplitLines(v) {
		m, err := mount.Parse(line)
		if err != nil {
			return "", err
		}
		if m.Host, err = abs(m.Host); err != nil {
			return "", err
		}
		lines = append(lines, m.String())
	}
	return strings.Join(lines, "\n"), nil
}

// servicePaths returns args with every path of a pathFlag absolute, as the
// service, whose working directory is not the shell's, must have them;
// a path the service would not see (hiddenFromService) is refused.
func servicePaths(args []string, spec service.Spec, host serviceHost) ([]string, error) {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		flag, isFlag := strings.CutPrefix(out[i], "--")
		name, value, inline := strings.Cut(flag, "=")
		change := pathFlag(name)
		if !isFlag || change == nil {
			continue
		}
		at := i
		if !inline {
			if at = i + 1; at >= len(out) {
				break
			}
			value, i = out[at], at
		}
		abs := func(p string) (string, error) {
			a, err := filepath.Abs(p)
			if err != nil {
				return "", fmt.Errorf("--%s %s: %w", name, p, err)
			}
			if err := hiddenFromService(a, spec, host); err != nil {
				return "", &config.UsageError{Err: fmt.Errorf("--%s %w", name, err)}
			}
			return a, nil
		}
		changed, err := change(value, abs)
		if err != nil {
			return nil, err
		}
		if inline {
			changed = "--" + name + "=" + changed
		}
		out[at] = changed
	}
	return out, nil
}

// underHome reports whether path is in what systemd's ProtectHome hides.
func underHome(path string) bool {
	return slices.ContainsFunc([]string{"/home", "/root", "/run/user"}, func(dir string) bool { return within(path, dir) })
}

// within reports whether path is dir or below it.
func within(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// dropFlag returns args without the flag --name and its value.
func dropFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--"+name:
			i++ // its value
		case strings.HasPrefix(a, "--"+name+"="):
		default:
			out = append(out, a)
		}
	}
	return out
}

// flagTokens returns the tokens of the flag --name and its value in args.
func flagTokens(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--"+name && i+1 < len(args):
			out = append(out, a, args[i+1])
			i++
		case strings.HasPrefix(a, "--"+name+"="):
			out = append(out, a)
		}
	}
	return out
}
