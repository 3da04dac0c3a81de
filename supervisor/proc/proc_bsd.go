//go:build unix && !linux

package proc

import "syscall"

// setParentDeathSignal does nothing: macOS and the BSDs have no parent-death
// signal, so the portable rule is the only guard there.
func setParentDeathSignal(*syscall.SysProcAttr) {}
