package supervisor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/install"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// A call goes through the same steps whatever runs it, a fresh worker of
// the pool's or a session's (see interpreter):
//
//	resolve  the code limit, the PEP 723 script, the runtime, the files of
//	         --deps and of the script's dependencies: fetched before a
//	         worker is taken, so a failed install costs no interpreter
//	acquire  the worker: of the learned set the call probably needs, if any
//	install  the files fetched, or those the code's imports need; a worker
//	         of a learned set that does not fit is swapped for a plain one
//	mount    the mounted folders, unless the interpreter has them
//	run      the code, within the call's time limit
//	collect  the result: notes, dependencies, install warnings, files
//
// A step that ends the call (an error, a failed install) skips the rest;
// the worker is then released as the interpreter says.

// step is one named step of a call.
type step struct {
	name string
	do   func(ctx context.Context) bool // false: the call ends here, with pipeline.res and .err
}

// pipeline is one call on its way through the steps: what each step
// found, for the next.
type pipeline struct {
	s        *Supervisor
	in       interpreter
	req      Request
	out      *installLines
	progress *callProgress // nil when the caller wants none

	start      time.Time
	limit      *deadline        // from resolve
	rt         *readyRuntime    // from resolve
	script     []string         // the PEP 723 block's dependencies
	fromScript bool             // the code has a PEP 723 block
	installed  map[string]bool  // the package files the interpreter has, and those fetched
	wheels     []bridge.Payload // fetched, not installed yet
	reqs       []string         // the requirements installed: the result's dependencies
	w          *worker.Worker   // from acquire
	files      bridge.Files     // from run

	res Result
	err error
}

// serve runs req through the steps of a call, in in.
func (s *Supervisor) serve(ctx context.Context, req Request, in interpreter) (Result, error) {
	p := &pipeline{s: s, in: in, req: req, out: &installLines{onLine: req.OnLine}, start: time.Now()}
	p.progress = s.cfg.newCallProgress(req, p.start)
	defer p.count()
	defer p.release()
	for _, st := range p.steps() {
		if !st.do(ctx) {
			s.log.Debug("call ended", zap.String("step", st.name), zap.Error(p.err))
			break
		}
	}
	return p.res, p.err
}

// steps are a call's steps, in order.
func (p *pipeline) steps() []step {
	return []step{
		{"resolve", p.resolve},
		{"acquire", p.acquire},
		{"install", p.install},
		{"mount", p.mount},
		{"run", p.run},
		{"collect", p.collect},
	}
}

// end ends the call with res and err, for a step to return.
func (p *pipeline) end(res Result, err error) bool {
	p.res, p.err = res, err
	return false
}

// count records the call in the metrics.
func (p *pipeline) count() {
	status := string(p.res.Status)
	if p.err != nil {
		status = "error"
	}
	p.s.metrics.calls.WithLabelValues(status).Inc()
	p.s.metrics.duration.Observe(time.Since(p.start).Seconds())
}

// release hands the worker back to the interpreter, once the call is over.
func (p *pipeline) release() {
	if p.w != nil {
		if p.err != nil {
			p.w.Spent = true // cancelled, or failed: its process serves no other call
		}
		p.in.release(p.w)
		p.w = nil
	}
}

// resolve checks the code, reads its PEP 723 block, waits for the runtime,
// starts the call's time limit and fetches the files of --deps and the
// script's dependencies that the interpreter lacks.
func (p *pipeline) resolve(ctx context.Context) bool {
	s, code := p.s, p.req.Code
	if s.cfg.CodeLimit > 0 && len(code) > s.cfg.CodeLimit {
		return p.end(Result{}, fmt.Errorf("%w: %d bytes, over the limit of %d bytes (%s); send shorter code",
			ErrCodeTooLarge, len(code), s.cfg.CodeLimit, humanize.IBytes(uint64(s.cfg.CodeLimit))))
	}
	if ask := p.req.Ask; (ask.Model || ask.Person) && ask.Asker == nil {
		return p.end(Result{}, errors.New("supervisor: the request's Ask has no Asker"))
	}
	var err error
	if p.script, p.fromScript, err = packages.FromCode(code); err != nil {
		return p.end(installError(nil, err, p.req.OnLine), nil)
	}
	if p.rt, err = s.runtime.Ensure(ctx, p.progress.preparing()); err != nil {
		return p.end(Result{}, err)
	}
	// One time limit for the whole call: fetching, installing and running
	// together. Only the wait for a free worker does not count.
	p.limit = s.cfg.newDeadline(p.start)
	p.installed = p.in.installedFiles(p.rt.Files)
	fetchCtx, cancel := p.limit.context(ctx)
	defer cancel()
	if p.wheels, err = p.rt.Pkgs.Files(fetchCtx, p.script, p.installed, p.out.add, p.progress); err != nil {
		return p.end(p.installFailed(ctx, install.PhaseFetch, p.script, err))
	}
	return true
}

// acquire takes the worker. A fresh interpreter's call asks for the learned
// set that its script names, or that its imports probably make.
func (p *pipeline) acquire(ctx context.Context) bool {
	kind := ""
	if p.in.learns() {
		if p.fromScript {
			kind = p.s.learn.Use(p.rt.Files, p.wheels)
		} else {
			kind = p.s.learn.Guess(p.rt.Files, p.req.Code)
		}
	}
	if !p.take(ctx, kind) {
		return false
	}
	// A worker of a learned set has its packages installed already.
	p.wheels = slices.DeleteFunc(p.wheels, func(wh bridge.Payload) bool { return p.w.Installed[wh.Name] })
	return true
}

// take takes a worker of kind from the interpreter, the progress clock
// stopped meanwhile, as the time limit is (interpreter.acquire).
func (p *pipeline) take(ctx context.Context, kind string) bool {
	waited := p.progress.wait()
	w, err := p.in.acquire(ctx, p.limit, p.progress, p.req.Principal, kind)
	waited()
	if err != nil {
		return p.end(Result{}, err)
	}
	p.w = w
	return true
}

// install installs the script's files, or, for code without a script,
// --deps and then what its imports need (see fromImports). A worker of a
// learned set that the imports do not fit is swapped for a plain one, and
// the rounds run again there, from the files the interpreter had before
// them: those the rounds on the learned worker fetched are not on the
// plain one.
func (p *pipeline) install(ctx context.Context) bool {
	p.reqs = p.script
	if !p.fromScript {
		before := maps.Clone(p.installed)
		reqs, fits, phase, err := p.fromImports(ctx)
		if !fits {
			if !p.swap(ctx) {
				return false
			}
			p.installed = before
			reqs, _, phase, err = p.fromImports(ctx)
		}
		p.reqs = reqs
		if err == nil {
			return true
		}
		if phase == install.PhaseImports && !p.limit.passed() {
			return p.end(Result{}, err)
		}
		return p.end(p.installFailed(ctx, phase, reqs, err))
	}
	if len(p.wheels) == 0 {
		return true
	}
	installCtx, cancel := p.limit.context(ctx)
	defer cancel()
	p.progress.Installing(p.wheels)
	if err := p.w.Conn.Install(installCtx, p.wheels); err != nil {
		return p.end(p.installFailed(ctx, install.PhaseInstall, p.reqs, err))
	}
	return true
}

// swap replaces a worker whose learned set the call's imports do not fit
// with a plain one: the guess was wrong.
func (p *pipeline) swap(ctx context.Context) bool {
	p.s.log.Debug("a learned set's worker does not fit the call", zap.String("set", p.w.Kind))
	p.release()
	return p.take(ctx, "")
}

// fromImports installs onto the worker the --deps files it lacks, then
// what the code's imports need (see [install.Installer.FromImports]), and
// returns the requirements, and whether the worker's learned set fits the
// call. --deps go first: what they bring is then importable, not inferred.
//
// On a worker of a learned set the lines go out only once the set proved
// to fit: a worker that does not fit leaves nothing in the call's output.
// In an interpreter that learns, the set the rounds made counts toward
// learning it.
func (p *pipeline) fromImports(ctx context.Context) ([]string, bool, install.Phase, error) {
	ctx, cancel := p.limit.context(ctx)
	defer cancel()
	w := p.w
	if len(p.wheels) > 0 {
		p.progress.Installing(p.wheels)
		if err := w.Conn.Install(ctx, p.wheels); err != nil {
			return nil, true, install.PhaseInstall, err
		}
	}
	inf := &install.Inference{}
	var held []install.Line
	var heldMu sync.Mutex
	onLine := p.out.add
	if w.Kind != "" {
		if inf = p.s.learn.Inference(w.Kind); inf == nil {
			return nil, false, install.PhaseImports, nil
		}
		onLine = func(l install.Line) {
			heldMu.Lock()
			defer heldMu.Unlock()
			held = append(held, l)
		}
	}
	reqs, fits, phase, err := p.rt.Pkgs.FromImports(ctx, w.Conn, p.req.Code, p.installed, onLine, p.progress, inf)
	if !fits {
		return reqs, false, phase, err
	}
	for _, l := range held {
		p.out.add(l)
	}
	if err == nil && p.in.learns() {
		p.s.learn.Inferred(p.rt.Files, inf)
	}
	return reqs, true, phase, err
}

// mount puts the mounted folders into the interpreter, unless it has them.
func (p *pipeline) mount(ctx context.Context) bool {
	if !p.in.mountsDue() {
		return true
	}
	mountCtx, cancel := p.limit.context(ctx)
	defer cancel()
	if err := p.s.files.putMounts(mountCtx, p.w); err != nil {
		return p.end(Result{}, err)
	}
	p.in.mountsPut()
	return true
}

// run runs the code (see Supervisor.call).
func (p *pipeline) run(ctx context.Context) bool {
	s := p.s
	run := bridge.RunRequest{Code: p.req.Code, Globals: p.req.Globals, Watch: s.cfg.watched(), FilesLimit: s.cfg.FilesLimit}
	stop := p.progress.running(&s.wg)
	p.res, p.files, p.err = s.call(ctx, p.w, run, runOpts{limit: p.limit, progress: p.progress, ask: p.req.Ask, onLine: p.req.OnLine})
	stop()
	return true
}

// collect completes the result: a note on a missing package, the
// dependencies, the installs' warnings ahead of the output, and the files.
func (p *pipeline) collect(ctx context.Context) bool {
	res := &p.res
	if res.Status == StatusRunError {
		res.Error = install.WithNote(res.Error, p.rt.Pkgs.MissingPackageNote(res.Error, p.req.Code, p.script, p.fromScript))
	}
	res.Dependencies = packages.WithoutPython(p.reqs)
	if len(p.out.warnings) > 0 {
		res.Output = append(p.out.warnings, res.Output...)
	}
	if p.err == nil {
		p.s.files.takeFiles(ctx, res, p.files, p.req.OnLine)
	}
	return true
}

// installFailed turns an install failure into the call's result, unless the
// call itself was cancelled. A failure because the call's time ran out in
// phase says so.
func (p *pipeline) installFailed(ctx context.Context, phase install.Phase, reqs []string, err error) (Result, error) {
	if ctx.Err() != nil {
		return Result{}, fmt.Errorf("call cancelled: %w", context.Cause(ctx))
	}
	if p.limit.passed() {
		err = fmt.Errorf("TimeoutError: the call did not finish within %s: its time ran out while %s", p.s.cfg.Timeout, phase)
	}
	p.s.log.Warn("cannot install packages", zap.Strings("requirements", reqs), zap.Error(err))
	return installError(reqs, err, p.req.OnLine), nil
}

// installLines passes the installs' lines on to the call's OnLine and keeps
// their warnings (extras a package does not declare), which open the call's
// output. The downloads' goroutines send progress at once, and OnLine is
// promised one line at a time.
type installLines struct {
	mu       sync.Mutex
	onLine   func(Line)
	warnings []string // read once the installs are over
}

// add takes one line: a warning goes out as a Stderr line, the rest as
// Progress lines.
func (o *installLines) add(l install.Line) {
	o.mu.Lock()
	defer o.mu.Unlock()
	line := Line{Stream: Progress, Text: l.Text}
	if l.Warning {
		line.Stream = Stderr
		o.warnings = append(o.warnings, l.Text)
	}
	if o.onLine != nil {
		o.onLine(line)
	}
}

// installError is the result of a call whose packages could not be installed.
func installError(reqs []string, err error, out func(Line)) Result {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		msg = "installing packages did not finish within the time limit"
	}
	if out != nil {
		out(Line{Stream: Failure, Text: msg})
	}
	return Result{Status: StatusInstallError, Dependencies: packages.WithoutPython(reqs), Error: msg}
}
