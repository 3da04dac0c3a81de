package service

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Manager is a service manager that Install registers the server with.
type Manager string

// The service managers: one per platform.
const (
	Systemd Manager = "systemd"
	Launchd Manager = "launchd"
	Windows Manager = "windows"
)

// ManagerFor returns the service manager of goos, or false for a system
// without one that Install supports.
func ManagerFor(goos string) (Manager, bool) {
	switch goos {
	case "linux":
		return Systemd, true
	case "darwin":
		return Launchd, true
	case "windows":
		return Windows, true
	}
	return "", false
}

// Spec is the service to install: everything its unit says. The command
// line layer resolves it (absolute paths, the deno its user can run); the
// renderers only format it, so that tests render every manager's unit on
// any system.
type Spec struct {
	Manager Manager
	// User installs into the installing user's own service manager (a
	// systemd user unit, a launchd agent) rather than the system's.
	User bool
	// Executable is the absolute path of mcp-run-python.
	Executable string
	// Args are the server's arguments: the mode, then its flags, with
	// --deno naming an absolute path.
	Args []string
	// WarmupArgs are the arguments of the warmup run before each start,
	// where the manager has such a step (systemd).
	WarmupArgs []string
	// CacheDir is the cache directory that --cache-dir gives, absolute;
	// empty for the service manager's own cache directory.
	CacheDir string
	// Home is the installing user's home directory: where a launchd agent
	// logs.
	Home string
}

// Names of the service: launchd names its jobs in reverse DNS.
const (
	serviceName  = "mcp-run-python"
	launchdLabel = "io.github.mcp-run-python"
	displayName  = "MCP Run Python"
	description  = "MCP Run Python: sandboxed Python for MCP clients"
)

// How Windows restarts the service: after each failure, a crash or an exit
// with an error, 5 s later; the failure count starts again after a day
// without one.
const (
	windowsRestartDelay = 5 * time.Second
	windowsResetPeriod  = 24 * time.Hour
)

// Unit is a rendered service definition.
type Unit struct {
	// Name is what the service manager calls the service.
	Name string
	// Path is the file Install writes, empty on Windows, where the
	// definition goes to the Service Control Manager's registry.
	Path string
	// Text is the file's content; on Windows, a description of the
	// registration.
	Text string
}

// errTemplateAction is returned for arguments that the service library
// would take for a template action: it renders the unit text as a template.
var errTemplateAction = errors.New(`an argument holds "{{", which the service library takes for a template`)

// Render returns the unit of spec, byte for byte what Install writes.
func Render(spec Spec) (Unit, error) {
	var u Unit
	switch spec.Manager {
	case Systemd:
		u = Unit{Name: serviceName, Path: "/etc/systemd/system/" + serviceName + ".service", Text: systemdUnit(spec)}
		if spec.User {
			u.Path = spec.Home + "/.config/systemd/user/" + serviceName + ".service"
		}
	case Launchd:
		u = Unit{Name: launchdLabel, Path: "/Library/LaunchDaemons/" + launchdLabel + ".plist", Text: launchdPlist(spec)}
		if spec.User {
			u.Path = spec.Home + "/Library/LaunchAgents/" + launchdLabel + ".plist"
		}
	case Windows:
		if spec.User {
			return Unit{}, errors.New("the Windows service manager has no user services: install as Administrator without --user")
		}
		u = Unit{Name: serviceName, Text: windowsRegistration(spec)}
	default:
		return Unit{}, fmt.Errorf("unknown service manager %q", spec.Manager)
	}
	if strings.Contains(u.Text, "{{") {
		return Unit{}, errTemplateAction
	}
	return u, nil
}

// systemdUnit is deploy/mcp-run-python.service with the server's command
// line: every hardening line is kept. A user unit runs as its user, who has
// no dynamic user to become, and reads its home (the cache and deno live
// there), read-only.
func systemdUnit(spec Spec) string {
	var b strings.Builder
	line := func(s ...string) {
		for _, x := range s {
			b.WriteString(x)
		}
		b.WriteByte('\n')
	}
	line("# Installed by `mcp-run-python service install`; remove it with")
	if spec.User {
		line("# `mcp-run-python service uninstall --user`.")
	} else {
		line("# `mcp-run-python service uninstall`.")
	}
	line("#")
	line("# Liveness: GET /healthz; readiness (a warm worker is ready): GET /readyz;")
	line("# Prometheus metrics: GET /metrics.")
	line()
	line("[Unit]")
	line("Description=", description)
	line("After=network-online.target")
	line("Wants=network-online.target")
	line()
	line("[Service]")
	line("Type=simple")
	if !spec.User {
		line("DynamicUser=yes")
	}
	line("# The cache: Pyodide, the worker program and the memory snapshot.")
	line("CacheDirectory=mcp-run-python")
	line("Environment=MCP_RUN_PYTHON_CACHE_DIR=%C/mcp-run-python")
	if !spec.User {
		line("Environment=HOME=%C/mcp-run-python")
	}
	if spec.CacheDir != "" {
		// --cache-dir overrides the variable: its directory must be writable.
		line("ReadWritePaths=", systemdWord(spec.CacheDir))
	}
	line("Environment=MCP_RUN_PYTHON_SHUTDOWN_TIMEOUT=10s")
	line("# Prepare the runtime first, so the service answers calls as soon as it is up;")
	line("# the server prepares it itself when this fails.")
	line("ExecStartPre=-", systemdCommand(spec.Executable, spec.WarmupArgs))
	line("# The first warmup downloads Pyodide: more than systemd's default 90 s.")
	line("TimeoutStartSec=10min")
	line("ExecStart=", systemdCommand(spec.Executable, spec.Args))
	line("Restart=on-failure")
	line("RestartSec=2s")
	line("# SIGTERM stops taking calls, lets the running ones finish (cancelling those")
	line("# still running after MCP_RUN_PYTHON_SHUTDOWN_TIMEOUT), stops every worker and")
	line("# exits 0. After TimeoutStopSec systemd kills whatever is left, workers too.")
	line("KillMode=mixed")
	line("TimeoutStopSec=30s")
	line()
	line("# Hardening: the supervisor needs its cache and loopback for its workers.")
	line("NoNewPrivileges=yes")
	line("ProtectSystem=strict")
	if spec.User {
		line("ProtectHome=read-only")
	} else {
		line("ProtectHome=yes")
	}
	line("PrivateTmp=yes")
	line("PrivateDevices=yes")
	line("ProtectKernelTunables=yes")
	line("ProtectKernelModules=yes")
	line("ProtectControlGroups=yes")
	line("RestrictSUIDSGID=yes")
	line("LockPersonality=yes")
	line("RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX")
	line()
	line("[Install]")
	if spec.User {
		line("WantedBy=default.target")
	} else {
		line("WantedBy=multi-user.target")
	}
	return b.String()
}

// systemdCommand is a command line as systemd reads it: each word quoted
// when it needs to be, and % and $ doubled, so that systemd expands neither
// specifiers nor variables in them.
func systemdCommand(exe string, args []string) string {
	words := make([]string, 0, 1+len(args))
	for _, w := range append([]string{exe}, args...) {
		words = append(words, systemdWord(strings.ReplaceAll(w, "$", "$$")))
	}
	return strings.Join(words, " ")
}

// systemdWord is w as one word of a unit's setting, which systemd splits at
// spaces, unquotes and expands % specifiers in.
func systemdWord(w string) string {
	w = strings.ReplaceAll(w, "%", "%%")
	if w == "" || strings.ContainsAny(w, " \t\n\"'\\;") {
		w = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(w) + `"`
	}
	return w
}

// launchdPlist is deploy/io.github.mcp-run-python.plist with the server's
// command line: an agent for spec.User, else a daemon, which runs as root.
func launchdPlist(spec Spec) string {
	logFile := "/Library/Logs/mcp-run-python.log"
	if spec.User {
		logFile = spec.Home + "/Library/Logs/mcp-run-python.log"
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Installed by mcp-run-python service install. -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>` + launchdLabel + `</string>

  <key>ProgramArguments</key>
  <array>
`)
	for _, a := range append([]string{spec.Executable}, spec.Args...) {
		b.WriteString("    <string>" + xmlEscape(a) + "</string>\n")
	}
	b.WriteString(`  </array>

  <key>EnvironmentVariables</key>
  <dict>
    <!-- How long running calls get to finish on SIGTERM; keep ExitTimeOut
         above it plus MCP_RUN_PYTHON_GRACE (2s) plus a few seconds. -->
    <key>MCP_RUN_PYTHON_SHUTDOWN_TIMEOUT</key>
    <string>10s</string>
  </dict>

  <!-- Start at load and at boot or login; restart after a crash or a
       non-zero exit, but not after a clean stop, like systemd's
       Restart=on-failure. -->
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>

  <!-- SIGTERM stops taking calls, lets the running ones finish, stops every
       worker and exits 0; after ExitTimeOut seconds launchd sends SIGKILL. -->
  <key>ExitTimeOut</key>
  <integer>30</integer>

  <key>StandardOutPath</key>
  <string>` + xmlEscape(logFile) + `</string>
  <key>StandardErrorPath</key>
  <string>` + xmlEscape(logFile) + `</string>
</dict>
</plist>
`)
	return b.String()
}

// xmlEscape escapes s for a plist's text.
func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// windowsRegistration describes what Install registers with the Service
// Control Manager.
func windowsRegistration(spec Spec) string {
	return "Windows service " + serviceName + "\n" +
		"  display name: " + displayName + "\n" +
		"  description:  " + description + "\n" +
		"  command line: " + WindowsCommandLine(spec.Executable, spec.Args) + "\n" +
		"  start:        automatic, as LocalSystem\n" +
		"  on failure:   restart after " + windowsRestartDelay.String() + ", also after an exit with an error;\n" +
		"                the failure count starts again after " +
		strconv.Itoa(int(windowsResetPeriod/time.Second)) + " s without one\n" +
		`  log:          %ProgramData%\mcp-run-python\` + serviceName + ".log\n"
}

// WindowsCommandLine is the command line that the Service Control Manager
// keeps for exe and args, quoted as golang.org/x/sys/windows/svc/mgr quotes
// it (syscall.EscapeArg, which exists on Windows only).
func WindowsCommandLine(exe string, args []string) string {
	words := make([]string, 0, 1+len(args))
	for _, w := range append([]string{exe}, args...) {
		words = append(words, windowsEscapeArg(w))
	}
	return strings.Join(words, " ")
}

// windowsEscapeArg is syscall.EscapeArg: it quotes s for
// CommandLineToArgvW.
func windowsEscapeArg(s string) string {
	if s == "" {
		return `""`
	}
	if !strings.ContainsAny(s, "\"\\ \t") {
		return s
	}
	hasSpace := strings.ContainsAny(s, " \t")
	var b strings.Builder
	if hasSpace {
		b.WriteByte('"')
	}
	slashes := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			slashes++
		case '"':
			// The backslashes before a quote are doubled, and the quote escaped.
			b.WriteString(strings.Repeat(`\`, slashes+1))
			slashes = 0
		default:
			slashes = 0
		}
		b.WriteByte(s[i])
	}
	if hasSpace {
		// Backslashes before the closing quote are doubled.
		b.WriteString(strings.Repeat(`\`, slashes))
		b.WriteByte('"')
	}
	return b.String()
}
