package proc

import "syscall"

// setParentDeathSignal has the kernel kill the process when the thread that
// started it ends, before the worker could even notice its stdin close.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
