//go:build !race

package pubgrub

// raceEnabled: see race_test.go.
const raceEnabled = false
