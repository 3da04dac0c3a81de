package config

import (
	"errors"
	"fmt"
	"strings"
)

// The defaults below depend on the operating system. Each function takes its
// GOOS (runtime.GOOS in production) and builds paths with that system's
// separator instead of filepath's, so that tests on one system cover all.

const goosWindows = "windows"

// cacheName is the directory of this program inside the user cache directory.
const cacheName = "mcp-run-python"

// denoExe is the file name of deno on goos.
func denoExe(goos string) string {
	if goos == goosWindows {
		return "deno.exe"
	}
	return "deno"
}

// defaultDeno returns the deno to run when --deno is not given: deno on PATH,
// else where deno's installer puts it ($DENO_INSTALL/bin when that is set,
// else $HOME/.deno/bin, %USERPROFILE%\.deno\bin on Windows), else the bare
// name, which then fails to start with exec's own message. Relative answers
// are skipped: they would depend on the working directory.
func defaultDeno(goos string, env Environment) string {
	exe := denoExe(goos)
	if path, err := env.LookPath(exe); err == nil && isAbs(goos, path) {
		return path
	}
	if dir, _ := env.LookupEnv("DENO_INSTALL"); isAbs(goos, dir) {
		return joinPath(goos, dir, "bin", exe)
	}
	// os.UserHomeDir is %USERPROFILE% on Windows, as in deno's installer.
	if home, err := env.UserHomeDir(); err == nil && isAbs(goos, home) {
		return joinPath(goos, home, ".deno", "bin", exe)
	}
	return exe
}

// defaultCacheDir returns mcp-run-python in the user cache directory. When
// that is unknown (its variable unset or relative) it falls back to where the
// system puts that directory by default inside the home directory.
func defaultCacheDir(goos string, env Environment) (string, error) {
	if dir, err := env.UserCacheDir(); err == nil && isAbs(goos, dir) {
		return joinPath(goos, dir, cacheName), nil
	}
	home, err := env.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find home directory: %w", err)
	}
	if home == "" {
		return "", errors.New("home directory unknown")
	}
	if !isAbs(goos, home) {
		return "", fmt.Errorf("home directory %q is not absolute", home)
	}
	return joinPath(goos, home, append(cacheUnderHome(goos), cacheName)...), nil
}

// cacheUnderHome is the user cache directory's default place in the home
// directory, as os.UserCacheDir would find it with its variable unset.
func cacheUnderHome(goos string) []string {
	switch goos {
	case "darwin", "ios":
		return []string{"Library", "Caches"}
	case goosWindows:
		return []string{"AppData", "Local"} // %LocalAppData%
	}
	return []string{".cache"} // $XDG_CACHE_HOME
}

// denoHelp describes the default of --deno on goos.
func denoHelp(goos string) string {
	if goos == goosWindows {
		return `path of deno.exe (default: deno.exe on PATH, else %DENO_INSTALL%\bin\deno.exe if set, else %USERPROFILE%\.deno\bin\deno.exe)`
	}
	return "path of deno (default: deno on PATH, else $DENO_INSTALL/bin/deno if set, else $HOME/.deno/bin/deno)"
}

// cacheDirHelp describes the default of --cache-dir on goos.
func cacheDirHelp(goos string) string {
	where := "$XDG_CACHE_HOME, else ~/.cache"
	switch goos {
	case "darwin", "ios":
		where = "~/Library/Caches"
	case goosWindows:
		where = `%LocalAppData%`
	}
	return "runtime files and snapshots (default: " + cacheName + " in " + where + ")"
}

// isAbs reports whether path is absolute on goos. Windows takes either slash
// here, as its own file functions do.
func isAbs(goos, path string) bool {
	if goos != goosWindows {
		return strings.HasPrefix(path, "/")
	}
	if strings.HasPrefix(path, `\\`) || strings.HasPrefix(path, "//") {
		return true // UNC
	}
	return len(path) >= 3 && isLetter(path[0]) && path[1] == ':' && (path[2] == '\\' || path[2] == '/')
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// joinPath appends elems to the absolute base with goos's separator. On
// Windows it turns base's forward slashes into backslashes, as filepath does
// there, since the result may end up in a deno permission.
func joinPath(goos, base string, elems ...string) string {
	sep := "/"
	if goos == goosWindows {
		sep = `\`
		base = strings.ReplaceAll(base, "/", sep)
	}
	return strings.TrimRight(base, sep) + sep + strings.Join(elems, sep)
}
