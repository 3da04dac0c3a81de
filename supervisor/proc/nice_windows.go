package proc

// Background would lower the CPU priority of the process pid; on Windows
// it leaves it as it is (the job object's limits still hold).
func Background(pid int) error { return nil }
