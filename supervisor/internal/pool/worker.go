package pool

// Worker is what the pool needs of a worker: the supervisor's deno workers
// are the real ones, and the pool's tests use workers in memory.
type Worker interface {
	comparable
	// LearnedSet is the kind of worker: the learned set of packages it has
	// loaded, "" for a plain one.
	LearnedSet() string
	// Readiness says how soon it can take a call.
	Readiness() Readiness
	// RestoreEnded is closed once the restore of a worker started on
	// standby has ended, made or failed; nil for a worker started restored.
	RestoreEnded() <-chan struct{}
	// Ended is closed once its process has ended.
	Ended() <-chan struct{}
	// Dead reports whether its process has ended.
	Dead() bool
	// Kill ends it, and returns once it is reaped.
	Kill()
	// Pid, ExitStatus and StderrTail describe it in logs.
	Pid() int
	ExitStatus() string
	StderrTail() string
}

// Readiness is how soon a warm worker can take a call. A worker started on
// standby has booted Pyodide's runtime but not made its interpreter: that
// is made on demand (Hooks.Restore) or by the first call.
type Readiness int

// A worker's readiness, from the soonest.
const (
	Restored  Readiness = iota // its interpreter is made
	Restoring                  // its interpreter is being made
	OnStandby                  // nobody has asked for its interpreter yet
)
