//go:build !linux

package supervisor

import "testing"

// denoChildren and openFDs read /proc, so the tests that count processes
// and descriptors run on Linux only.
func denoChildren(t *testing.T) []int {
	t.Helper()
	t.Skip("lists processes through /proc: Linux only")
	return nil
}

func openFDs(t *testing.T) int {
	t.Helper()
	t.Skip("counts descriptors through /proc: Linux only")
	return 0
}
