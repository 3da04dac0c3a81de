//go:build race

package pubgrub

// raceEnabled: the race detector slows the solver several times over, so
// timing bounds allow for it.
const raceEnabled = true
