//go:build !linux

package main_test

import "testing"

// denoChildren reads /proc, so the end-to-end tests that watch a server's
// workers run on Linux only.
func denoChildren(t *testing.T, pid int) []denoChild {
	t.Helper()
	t.Skip("lists processes through /proc: Linux only")
	return nil
}
