//go:build !windows

package service

// Run reports that the program is not a Windows service: elsewhere a
// service manager (systemd, launchd) runs it as the console program it is,
// and stops it with SIGTERM.
func Run(Program) (status int, ok bool) {
	return 0, false
}
