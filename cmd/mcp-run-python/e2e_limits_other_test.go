//go:build !linux

package main_test

import "testing"

// rssOf reads /proc, so the memory bounds of the hostile-load tests are
// checked on Linux only; elsewhere it reports 0 and the bounds hold.
func rssOf(t *testing.T, _ int) int64 {
	t.Helper()
	return 0
}
