//go:build !unix

package main_test

import "testing"

// makeFIFO skips the test: there are no FIFOs in the file system here.
func makeFIFO(t *testing.T, _ string) {
	t.Helper()
	t.Skip("no FIFOs on this system")
}
