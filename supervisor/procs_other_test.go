//go:build !linux

package supervisor

import "testing"

// listsProcesses says whether denoChildren works here rather than skip: a
// cleanup checks for leftover workers only where it does, since a skip there
// would report the test that ran as skipped.
const listsProcesses = false

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
