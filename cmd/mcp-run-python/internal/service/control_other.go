//go:build !windows

package service

// afterInstall completes an installation that kservice does not: nothing
// outside Windows.
func afterInstall(string) error { return nil }
