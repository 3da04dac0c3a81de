package install

// Bytecode for installed wheels. Packages come as source, and every fresh
// interpreter would compile their modules again at import, printing their
// compile warnings (sympy 1.11's SyntaxWarning, 'return' in a 'finally'
// block, from sympy/testing/runtests.py) into the call's output. So a wheel a call installs is
// compiled once, in the background, by a compile worker, and the cache
// keeps the result beside the wheel (packages.Cache.StoreBytecode): the
// same wheel with unchecked-hash .pyc files added. Later installs send that
// variant instead, and its modules import from bytecode.
//
// Where it is compiled: in a worker of its own (roleCompile), restored from
// the runtime's snapshot like any worker, never given user code nor the
// network. No file is ever taken from a worker that ran user code: that
// code could have changed the interpreter, or the files, to taint every
// later call. compile() runs none of the package's code, but the source is
// hostile, so the worker has the memory limit of every worker, each wheel a
// time limit (compileTimeout) and each of its modules one (moduleTimeout),
// its bytecode a size limit (bytecodeLimit), and the archive it sends is
// checked before it lands in the cache. A module that ends the worker or
// passes a limit is skipped; any other failure leaves the wheel as it was:
// installed from source.
//
// Why in the background: the first call that installs a wheel must not
// wait for it, nor share the machine with it. It installs the original,
// as before, and the compile waits until no call holds a worker and the
// pool starts none (at most compileDefer), then runs at a lower CPU
// priority (proc.Background). Measured on 2 loaded cores, first calls
// alternating between a server with it and one without: p50 5.0 and 5.6 s
// (300 modules, 8 calls each).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

const (
	// compileTimeout bounds the compile of one wheel. sympy's 35 MB of
	// source is the largest common case.
	compileTimeout = 5 * time.Minute
	// bytecodeRatio bounds what the bytecode of one wheel may be beside
	// the modules' source (and worker.MaxBytecode in all): a .pyc is about
	// as large as its module (sympy's: 1.1×), and constant folding is
	// bounded by the compiler (no folded constant past 4 KiB), so more is a
	// hostile package's, which imports from source.
	bytecodeRatio = 3
	// maxCompileQueue bounds the wheels waiting to be compiled: calls with
	// ever new packages cannot grow it without end. One left out is
	// queued again by a later install.
	maxCompileQueue = 256
	// compileDefer bounds how long a compile waits for the calls to end
	// (see quiet): on a server that is never idle it runs beside them.
	compileDefer = 30 * time.Second
	// moduleTimeout bounds the compile of one module. 1.5 MB of plain
	// statements took 5-6 s in Pyodide; or-patterns of 100 names in 100
	// orders, 48 KiB, took 2 s, and with twice the names more than 1 GiB.
	moduleTimeout = time.Minute
	// maxCrashes bounds the modules of a wheel whose compile ended the
	// worker's interpreter (nesting past the wasm stack), took longer than
	// moduleTimeout or passed the memory limit, each then skipped in a new
	// worker; past it the wheel imports from source.
	maxCrashes = 4
)

// bytecodeLimit is the most bytecode a wheel with source bytes of modules
// may have.
func bytecodeLimit(source int64) int64 {
	return min(worker.MaxBytecode, bytecodeRatio*source+1<<20)
}

// Bytecoder queues the wheels to compile and compiles them, one at a time,
// in one compile worker that lives while there is work.
type Bytecoder struct {
	Background
	idle  func() bool                    // no call holds a worker of the pool, which starts none
	start func() (*worker.Worker, error) // starts a compile worker
	// key names the interpreter in the cache: its cache tag and the
	// Pyodide release (which fixes the magic number). tag is the tag the
	// compiling interpreter must report.
	key, tag string

	mu      sync.Mutex
	queue   []packages.LocalFile
	seen    map[string]bool // wheel paths queued, compiled or failed in this process
	running bool
}

// NewBytecoder returns the bytecoder of the interpreter of Python version
// python ("3.14"), working in bg while idle says the pool is, in compile
// workers that start starts; nil, and wheels are installed as they are,
// when the version is not known.
func NewBytecoder(python string, bg Background, idle func() bool, start func() (*worker.Worker, error)) *Bytecoder {
	pyodide, err := js.PyodideVersion()
	if err != nil || python == "" {
		return nil
	}
	tag := "cpython-" + strings.ReplaceAll(python, ".", "")
	return &Bytecoder{Background: bg, idle: idle, start: start, key: tag + "-pyodide-" + pyodide, tag: tag, seen: map[string]bool{}}
}

// variant returns the wheel to install for f: its compiled variant when
// the cache has one, else f, which is then queued to be compiled (unless it
// was, in this process: one that failed is not tried again).
func (b *Bytecoder) variant(cache *packages.Cache, f packages.LocalFile) (path string, ok bool) {
	if b == nil || !strings.HasSuffix(f.Filename, ".whl") {
		return "", false
	}
	path, _, done := cache.Compiled(f, b.key)
	if done {
		return path, path != ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[f.Path] || len(b.queue) >= maxCompileQueue || b.Ctx.Err() != nil {
		return "", false
	}
	b.seen[f.Path] = true
	b.queue = append(b.queue, f)
	if !b.running {
		// Not once the supervisor is closing: the queue is dropped.
		b.running = b.WG.Go(func() { b.compileAll(cache) })
	}
	return "", false
}

// next takes the next wheel of the queue; ok is false, and the bytecoder
// stops running, when there is none.
func (b *Bytecoder) next() (f packages.LocalFile, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 || b.Ctx.Err() != nil {
		b.running = false
		return packages.LocalFile{}, false
	}
	f = b.queue[0]
	b.queue = b.queue[1:]
	return f, true
}

// compileAll compiles the queued wheels, starting a compile worker for
// them, and a new one after a wheel that failed (the worker may be
// wedged), and stops it once the queue is empty.
func (b *Bytecoder) compileAll(cache *packages.Cache) {
	var w *worker.Worker
	defer func() {
		if w != nil {
			w.Kill()
		}
	}()
	for {
		f, ok := b.next()
		if !ok {
			return
		}
		b.quiet()
		if w == nil {
			var err error
			if w, err = b.start(); err != nil {
				if b.Ctx.Err() == nil {
					b.Log.Warn("no compile worker: packages import from source", zap.Error(err))
				}
				continue
			}
		}
		start := time.Now()
		var skip []string
		path, m, err := b.compile(cache, w, f, skip)
		for ce := (*bridge.CompileError)(nil); errors.As(err, &ce) && ce.Module != "" && len(skip) < maxCrashes && b.Ctx.Err() == nil; {
			// The worker is gone with its interpreter, or stopped: again
			// in a new one, without that module, which imports from source.
			b.Log.Debug("compiling a module ended or outran the compile worker; compiling its package again without it",
				zap.String("file", f.Filename), zap.String("module", ce.Module), zap.Error(err))
			w.Kill()
			if w, err = b.start(); err != nil {
				break
			}
			skip = append(skip, ce.Module)
			path, m, err = b.compile(cache, w, f, skip)
		}
		if err != nil {
			if b.Ctx.Err() == nil {
				b.Log.Warn("cannot compile a package to bytecode: it imports from source", zap.String("file", f.Filename), zap.Error(err))
			}
			if w != nil {
				w.Kill()
				w = nil
			}
			continue
		}
		b.Log.Debug("compiled a package to bytecode", zap.String("file", f.Filename), zap.String("path", path),
			zap.Int("modules", m.Modules), zap.Int("skipped", m.Skipped), zap.Duration("took", time.Since(start)))
		b.Cache.PruneSoon()
	}
}

// quiet waits until no call holds a worker of the pool and the pool starts
// none, for at most compileDefer, or until the supervisor closes.
func (b *Bytecoder) quiet() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(compileDefer)
	for time.Now().Before(deadline) {
		if b.idle() {
			return
		}
		select {
		case <-b.Ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// compile compiles one wheel in w, but for the modules skip, and stores its
// compiled variant.
func (b *Bytecoder) compile(cache *packages.Cache, w *worker.Worker, f packages.LocalFile, skip []string) (string, packages.Bytecode, error) {
	release, err := b.Cache.Hold(f.Path)
	if err != nil {
		return "", packages.Bytecode{}, fmt.Errorf("hold it in the cache: %w", err)
	}
	defer release()
	if _, _, done := cache.Compiled(f, b.key); done {
		return "", packages.Bytecode{}, nil // another server did
	}
	source, err := packages.SourceBytes(f.Path)
	if err != nil {
		return "", packages.Bytecode{}, err
	}
	wheels, err := plainWheels([]packages.LocalFile{f})
	if err != nil {
		return "", packages.Bytecode{}, err
	}
	ctx, watch := watchCompile(b.Ctx)
	defer watch.stop()
	if b.MemoryLimit > 0 {
		b.WG.Go(func() { w.WatchMemory(ctx, b.MemoryLimit, b.Log, watch.overMemory) })
	}
	printed := func(lines []string) {
		for _, l := range lines {
			b.Log.Debug("compile worker printed", zap.String("file", f.Filename), zap.String("line", l))
		}
	}
	got, err := w.Conn.Compile(ctx, wheels[0], bytecodeLimit(source), skip, printed, watch.compiling)
	if err != nil {
		if b.Ctx.Err() == nil {
			err = watch.failure(ctx, err)
		}
		return "", packages.Bytecode{}, err
	}
	if got.Tag != b.tag {
		return "", packages.Bytecode{}, fmt.Errorf("the interpreter's cache tag is %q, not %q", got.Tag, b.tag)
	}
	m := packages.Bytecode{Tag: got.Tag, Magic: got.Magic, Modules: got.Modules, Skipped: got.Skipped, Crashed: skip}
	path, err := cache.StoreBytecode(f, b.key, m, got.Archive)
	return path, m, err
}

// plainWheels is wheels without the compiled variants: the files as
// fetched.
func plainWheels(local []packages.LocalFile) ([]bridge.Payload, error) {
	return payloads(local, map[string]bool{}, nil)
}

// compileWatch stops a compile that takes longer than compileTimeout, one
// of whose modules takes longer than moduleTimeout, or whose worker passes
// the memory limit, and says why: the module, when it was one.
type compileWatch struct {
	cancel context.CancelCauseFunc
	wheel  *time.Timer
	// modules is stopped between modules. module is the one compiling, as
	// the worker told it: set and read by the goroutine that compiles.
	modules *time.Timer
	module  string
}

// errSlowModule and errOverMemory are why a compile's context was
// cancelled by its watch.
var (
	errSlowModule = fmt.Errorf("it took longer than %s", moduleTimeout)
	errOverMemory = errors.New("its worker passed the memory limit")
)

// watchCompile returns the context of a compile under parent and its
// watch, whose stop must be called when the compile is over.
func watchCompile(parent context.Context) (context.Context, *compileWatch) {
	ctx, cancel := context.WithCancelCause(parent)
	c := &compileWatch{cancel: cancel}
	c.wheel = time.AfterFunc(compileTimeout, func() { cancel(fmt.Errorf("it took longer than %s", compileTimeout)) })
	c.modules = time.AfterFunc(moduleTimeout, func() { cancel(errSlowModule) })
	c.modules.Stop()
	return ctx, c
}

// compiling is told the module whose compile begins, or "" as it ends.
func (c *compileWatch) compiling(module string) {
	c.module = module
	c.modules.Stop()
	if module != "" {
		c.modules.Reset(moduleTimeout)
	}
}

// overMemory stops the compile: its worker passed the memory limit.
func (c *compileWatch) overMemory() { c.cancel(errOverMemory) }

// failure returns err, the compile's failure, with why the watch stopped
// it: a *bridge.CompileError naming the module when it was one's fault,
// so that the wheel is compiled again without it.
func (c *compileWatch) failure(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	switch {
	case cause == nil || errors.Is(cause, context.Canceled):
		return err
	case c.module != "" && (errors.Is(cause, errSlowModule) || errors.Is(cause, errOverMemory)):
		return &bridge.CompileError{Reason: cause.Error(), Module: c.module}
	}
	return fmt.Errorf("%w (%w)", err, cause)
}

// stop ends the watch.
func (c *compileWatch) stop() {
	c.wheel.Stop()
	c.modules.Stop()
	c.cancel(nil)
}
