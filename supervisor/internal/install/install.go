package install

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
	"github.com/mcp-run-python/mcp-run-python/supervisor/ttlcache"
)

// planTTL is how long a resolved set of requirements is reused. Within it,
// calls with the same requirements ask no index at all; after it, newer
// releases are seen.
const planTTL = 10 * time.Minute

// Config is what an Installer takes of the supervisor's configuration.
type Config struct {
	CacheDir        string   // the package cache is its packages directory
	IndexURL        string   // "" means packages.DefaultIndexURL
	PyodideIndexURL string   // "" means the host of the pinned Pyodide release
	Offline         bool     // install from the package cache only
	Deps            []string // --deps, installed for every call
	// Made are the top-level modules the worker's runner makes itself
	// (code mode's mcp_tools): no package provides them, so none is
	// installed or suggested for them.
	Made map[string]bool
}

// Line is what an install says as it goes: a step, or a warning of its
// plan (an extra a package does not declare), which belongs in the call's
// output as pip's do.
type Line struct {
	Text    string
	Warning bool
}

// Progress hears what an install does, for a call's client. The
// supervisor's call progress is one; its methods must do nothing on a nil
// receiver.
type Progress interface {
	// Resolving is told the requirements being resolved.
	Resolving(reqs []string)
	// Transfer returns the package cache's transfer callback, or nil.
	Transfer() func(file string, bytes, size int64)
	// Installing is told the files being installed.
	Installing(wheels []bridge.Payload)
}

// silent is the Progress of installs no call waits for.
type silent struct{}

func (silent) Resolving([]string)                   {}
func (silent) Transfer() func(string, int64, int64) { return nil }
func (silent) Installing([]bridge.Payload)          {}

// Worker is what an install needs of a worker: its connection, which
// answers the imports query and installs files.
type Worker interface {
	// Imports returns the modules code imports that the interpreter
	// cannot, as if the hidden top-level modules were not there.
	Imports(ctx context.Context, code string, hidden []string) ([]string, error)
	// Install installs wheels into the interpreter.
	Install(ctx context.Context, wheels []bridge.Payload) error
}

// Installer resolves, fetches and installs the packages of calls. It works
// on the trusted side: the index, the package host and the cache are its
// alone, and workers get the files' bytes over the bridge, so user code needs
// neither network nor file access for its dependencies.
type Installer struct {
	resolver *packages.Resolver
	// mirror resolves while Pyodide's package host cannot be reached.
	mirror   *packages.Resolver
	hostDown atomic.Bool // logged once that the host could not be reached
	cache    *packages.Cache
	imports  map[string]string // import name → package name, from Pyodide's lock file
	log      *zap.Logger
	made     map[string]bool // Config.Made
	// deps are --deps, for every call: as given, or pinned to what the
	// snapshot holds (see pinDeps).
	deps atomic.Pointer[[]string]

	// bytecode makes and finds the compiled variants of wheels (see
	// bytecode.go); nil installs wheels as they are.
	bytecode *Bytecoder

	// plans are resolved sets of requirements, by the requirements: a
	// repeated call asks no index for planTTL. Bounded, so that calls with
	// ever new requirements cannot grow it without end.
	plans *ttlcache.Cache[string, resolved]
}

type resolved struct {
	plan packages.Plan
	at   time.Time
}

// maxPlans bounds the resolved sets kept: far more than the distinct sets
// of dependencies a server's calls use within planTTL.
const maxPlans = 1024

// New reads the lock file of the installed Pyodide and sets up the
// resolver and the package cache under the cache directory. bytecode, if
// not nil, compiles the wheels installed.
func New(cfg Config, pyodideDir string, bytecode *Bytecoder, log *zap.Logger) (*Installer, error) {
	lock, err := packages.ReadLock(filepath.Join(pyodideDir, "pyodide-lock.json"))
	if err != nil {
		return nil, err
	}
	cache, err := packages.NewCache(filepath.Join(cfg.CacheDir, "packages"), packages.CacheOptions{Offline: cfg.Offline})
	if err != nil {
		return nil, err
	}
	host := cfg.PyodideIndexURL
	if host == "" {
		version, err := js.PyodideVersion()
		if err != nil {
			return nil, err
		}
		host = packages.PyodideHostURL(version)
	}
	index := cfg.IndexURL
	if index == "" {
		index = packages.DefaultIndexURL
	}
	resolver, err := packages.NewResolver(packages.Config{Lock: lock, PyodideURL: host, IndexURL: index, Cache: cache})
	if err != nil {
		return nil, err
	}
	in := &Installer{
		resolver: resolver,
		mirror:   resolver.WithoutPyodideHost(),
		cache:    cache,
		imports:  lock.ImportTable(),
		log:      log,
		made:     cfg.Made,
		bytecode: bytecode,
		plans:    ttlcache.New[string, resolved](maxPlans, planTTL),
	}
	in.deps.Store(&cfg.Deps)
	return in, nil
}

// Files resolves reqs (after --deps) and returns the files to install, read
// from the cache, skipping those already installed. A failure is a
// *packages.Error naming the requirement. Progress goes to the server's log
// and, as Lines, to out if it is not nil, and to prog.
func (in *Installer) Files(ctx context.Context, reqs []string, installed map[string]bool, out func(Line), prog Progress) ([]bridge.Payload, error) {
	all := append(slices.Clone(*in.deps.Load()), reqs...)
	if len(all) == 0 {
		return nil, nil
	}
	_, local, err := in.obtain(ctx, all, nil, installed, out, prog)
	if err != nil {
		return nil, err
	}
	return in.wheels(local, installed)
}

// pinDeps makes --deps the exact versions in pins ("name==version"), those
// that the snapshot holds loaded: a call's requirements are resolved with
// them, and a package of another version can never land over a loaded one.
func (in *Installer) pinDeps(pins []string) { in.deps.Store(&pins) }

// progress returns the function that sends a progress line to the server's
// log and, as a Line, to out if it is not nil.
func (in *Installer) progress(out func(Line)) func(string) {
	return func(msg string) {
		in.log.Debug(msg)
		if out != nil {
			out(Line{Text: msg})
		}
	}
}

// obtain resolves reqs and inferred (see [Installer.plan]) and fetches the
// files not installed yet into the cache.
//
// When Pyodide's package host cannot be reached, it tries once more with
// the index standing in for the host's pure-Python packages (see
// [packages.Resolver.WithoutPyodideHost]); a plan made that way is reused
// like any other. If that fails too, the error is the host's: it names the
// host and the flag that points elsewhere.
//
// The plan's warnings go to out as warnings: they are part of the
// call's output, as pip's are.
func (in *Installer) obtain(ctx context.Context, reqs, inferred []string, installed map[string]bool, out func(Line), prog Progress) (packages.Plan, []packages.LocalFile, error) {
	prog.Resolving(append(slices.Clone(reqs), inferred...))
	plan, local, err := in.resolveAndFetch(ctx, reqs, inferred, installed, in.progress(out), prog.Transfer())
	for _, w := range plan.Warnings {
		in.log.Debug(w)
		if out != nil && err == nil {
			out(Line{Text: w, Warning: true})
		}
	}
	return plan, local, err
}

// resolveAndFetch is obtain without the warnings.
func (in *Installer) resolveAndFetch(ctx context.Context, reqs, inferred []string, installed map[string]bool, progress func(string), transfer func(file string, bytes, size int64)) (packages.Plan, []packages.LocalFile, error) {
	key := planKey(reqs, inferred)
	plan, err := in.plan(ctx, in.resolver, key, reqs, inferred, progress)
	var local []packages.LocalFile
	if err == nil {
		local, err = in.fetch(ctx, plan, installed, progress, transfer)
	}
	if err == nil || !packages.PyodideHostUnreachable(err) || ctx.Err() != nil {
		return plan, local, err
	}
	if !in.hostDown.Swap(true) {
		in.log.Warn("Pyodide's package host cannot be reached: pure-Python built-in packages come from the index when it has them", zap.Error(err))
	}
	progress("Pyodide's package host cannot be reached; trying the index's builds of its pure-Python packages")
	in.plans.Remove(key)
	mplan, merr := in.plan(ctx, in.mirror, key, reqs, inferred, progress)
	if merr == nil {
		local, merr = in.fetch(ctx, mplan, installed, progress, transfer)
	}
	if merr != nil {
		if ctx.Err() != nil {
			return packages.Plan{}, nil, ctx.Err()
		}
		in.plans.Remove(key)
		progress("the index cannot stand in for Pyodide's package host: " + merr.Error())
		return packages.Plan{}, nil, err
	}
	return mplan, local, nil
}

// fetch gets the files of plan not installed yet into the cache, telling
// transfer (if not nil) how much of each has come.
func (in *Installer) fetch(ctx context.Context, plan packages.Plan, installed map[string]bool, progress func(string), transfer func(file string, bytes, size int64)) ([]packages.LocalFile, error) {
	var todo packages.Plan
	for _, f := range plan.Files {
		if !installed[f.Filename] {
			todo.Files = append(todo.Files, f)
		}
	}
	return in.cache.WithProgress(progress).WithTransfer(transfer).Fetch(ctx, todo)
}

// wheels names fetched files for the worker and marks them installed. The
// bridge reads them from the cache as it sends them, a chunk at a time, so
// a large wheel is never held whole here. A wheel compiled to bytecode is
// named by its compiled variant; one not compiled yet is queued for it (see
// bytecode.go). Keys that name a set of files by their paths take
// packages.SourcePath of each, which a compile does not change.
func (in *Installer) wheels(local []packages.LocalFile, installed map[string]bool) ([]bridge.Payload, error) {
	return payloads(local, installed, func(f packages.LocalFile) (string, bool) { return in.bytecode.variant(in.cache, f) })
}

// payloads names fetched files for the worker, each by its variant when
// variant (if not nil) says it has one, and marks them installed.
func payloads(local []packages.LocalFile, installed map[string]bool, variant func(packages.LocalFile) (string, bool)) ([]bridge.Payload, error) {
	wheels := make([]bridge.Payload, len(local))
	for i, f := range local {
		path := f.Path
		if variant != nil {
			if p, ok := variant(f); ok {
				path = p
			}
		}
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("read %s from the package cache: %w", f.Filename, err)
		}
		wheels[i] = bridge.Payload{File: bridge.File{Name: f.Filename, InstallDir: f.InstallDir, Size: fi.Size()}, Path: path}
		installed[f.Filename] = true
	}
	return wheels, nil
}

// planKey is the key of the plans made for these requirements.
func planKey(reqs, inferred []string) string {
	key := strings.Join(reqs, "\n")
	if len(inferred) > 0 {
		key += "\n\x00inferred\n" + strings.Join(inferred, "\n")
	}
	return key
}

// plan resolves reqs and the requirements inferred from imports with r (see
// [packages.Resolver.ResolveInferred]), reusing a plan made for the same
// requirements, under key, within planTTL.
func (in *Installer) plan(ctx context.Context, r *packages.Resolver, key string, reqs, inferred []string, progress func(string)) (packages.Plan, error) {
	if got, ok := in.plans.Get(key); ok {
		progress("resolved " + strings.Join(append(slices.Clone(reqs), inferred...), ", ") + " (as resolved " + time.Since(got.at).Round(time.Second).String() + " ago)")
		return got.plan, nil
	}
	plan, err := r.WithProgress(progress).ResolveInferred(ctx, reqs, inferred)
	if err != nil {
		return packages.Plan{}, err
	}
	in.plans.Add(key, resolved{plan, time.Now()})
	return plan, nil
}

// maxImportRounds bounds the rounds of installing what the code's imports
// need and then asking the worker again what is still missing.
const maxImportRounds = 2

// FromImports installs into w the packages for the modules code imports
// that w cannot import yet, and returns the requirements it installed. Call
// it after installing --deps: what they bring is then importable and not
// inferred again.
//
// It works in rounds: the packages inferred from the missing imports are
// installed first, then the worker is asked again what is still missing,
// because a package often brings another module the code imports (`import
// mdit_py_plugins, markdown_it`: mdit-py-plugins brings markdown-it-py). A
// name that no package provides is not installed and not an error: Python
// raises ImportError only if that import really runs. It is said in a
// progress line once a later round finds it still missing (or no round is
// left to look). A project on the index whose wheel does not provide the
// imported module (a look-alike) is not installed either.
//
// A failure names the phase it happened in (finding imports, resolving and
// downloading, installing).
//
// inf records the first round's answer and the wheels installed; on a
// worker of a learned set it also hides the set's modules and claims its
// wheels instead of installing them (see [Inference]), and fits is false,
// with no error, when the set is not what the rounds would install: the
// call must go on with a plain worker.
func (in *Installer) FromImports(ctx context.Context, w Worker, code string, installed map[string]bool, out func(Line), prog Progress, inf *Inference) (reqs []string, fits bool, phase Phase, err error) {
	// Without the word there is no import statement to find: skip the round trip.
	if !strings.Contains(code, "import") {
		if len(inf.unclaimed) > 0 {
			return nil, false, PhaseImports, nil
		}
		return nil, true, PhaseNone, nil
	}
	progress := in.progress(out)
	tried := map[string]bool{} // normalized packages looked up in a round
	type pending struct {
		round  int
		reason string
	}
	notFound := map[string]pending{} // by import name
	var missing []string
	round := 0
	for ; round < maxImportRounds; round++ {
		if missing, err = w.Imports(ctx, code, inf.hidden()); err != nil {
			return reqs, true, PhaseImports, fmt.Errorf("find the code's imports: %w", err)
		}
		missing = slices.DeleteFunc(missing, func(name string) bool {
			top, _, _ := strings.Cut(name, ".")
			return in.made[top]
		})
		if round == 0 {
			inf.first = slices.Clone(missing)
		}
		var fresh []packages.Inferred
		for _, inf := range packages.InferImports(missing, nil, in.imports) {
			if key := packages.Normalize(inf.Package); !tried[key] {
				tried[key] = true
				fresh = append(fresh, inf)
			}
		}
		if len(fresh) == 0 {
			break
		}
		wheels, used, skipped, err := in.inferredFiles(ctx, fresh, reqs, installed, out, prog)
		if err != nil {
			// The failed call lists what it tried to install, as before
			// there were rounds.
			for _, inf := range fresh {
				reqs = append(reqs, inf.Package)
			}
			return reqs, true, PhaseFetch, err
		}
		for imp, why := range skipped {
			notFound[imp] = pending{round, why}
		}
		if len(wheels) > 0 {
			if inf.unclaimed != nil {
				if !inf.claim(wheels) {
					return reqs, false, PhaseImports, nil
				}
			} else {
				prog.Installing(wheels)
				if err := w.Install(ctx, wheels); err != nil {
					return append(reqs, used...), true, PhaseInstall, err
				}
			}
			inf.wheels = append(inf.wheels, wheels...)
		}
		reqs = append(reqs, used...)
	}
	if len(inf.unclaimed) > 0 {
		return reqs, false, PhaseImports, nil
	}
	// A name skipped in an earlier round that the last look still found
	// missing, or one skipped in the last round, is really not there.
	imps := make([]string, 0, len(notFound))
	for imp := range notFound {
		imps = append(imps, imp)
	}
	slices.Sort(imps)
	for _, imp := range imps {
		p := notFound[imp]
		switch {
		case p.round < round && !slices.Contains(missing, imp):
			progress(imp + ": provided by the packages installed for the other imports")
		default:
			progress("skipping " + imp + ": no package provides it, so importing it raises ImportError (" + p.reason + ")")
		}
	}
	return reqs, true, PhaseNone, nil
}

// inferredFiles resolves the packages inferred from imports (after --deps
// and those of earlier rounds, so that versions stay consistent) and
// returns the files to install, the requirements they are for, and the
// import names left out because no package provides them, with why.
//
// A package from the index that was chosen because of an import name (not
// one of Pyodide's built-ins, whose lock file lists their imports) is
// checked to provide the imported top-level module: a look-alike project
// that took the name on the index, or a project some table maps wrongly, is
// dropped and the rest resolved again.
func (in *Installer) inferredFiles(ctx context.Context, fresh []packages.Inferred, earlier []string, installed map[string]bool, out func(Line), prog Progress) ([]bridge.Payload, []string, map[string]string, error) {
	progress := in.progress(out)
	firm := append(slices.Clone(*in.deps.Load()), earlier...)
	skipped := map[string]string{}
	cand := slices.Clone(fresh)
	for len(cand) > 0 {
		names := make([]string, len(cand))
		for i, inf := range cand {
			names[i] = inf.Package
		}
		plan, local, err := in.obtain(ctx, firm, names, installed, out, prog)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, sk := range plan.Skipped {
			for _, inf := range cand {
				if inf.Package == sk.Requirement {
					skipped[inf.Import] = sk.Reason
				}
			}
		}
		var keep []packages.Inferred
		lookalike := false
		for _, inf := range cand {
			if _, ok := skipped[inf.Import]; ok {
				continue
			}
			if why := lookAlike(inf, plan, local); why != "" {
				progress("skipping look-alike " + why)
				skipped[inf.Import] = "the project of that name on the index is a look-alike"
				lookalike = true
				continue
			}
			keep = append(keep, inf)
		}
		if !lookalike {
			wheels, err := in.wheels(local, installed)
			if err != nil {
				return nil, nil, nil, err
			}
			var used []string
			for _, inf := range keep {
				used = append(used, inf.Package)
			}
			return wheels, used, skipped, nil
		}
		cand = keep
	}
	return nil, nil, skipped, nil
}

// lookAlike says why the index package chosen for an import does not
// provide the imported module ("" when it does, or when it is not an index
// package fetched now: Pyodide's built-ins list their imports in the lock
// file, and a file installed before was checked then).
func lookAlike(inf packages.Inferred, plan packages.Plan, local []packages.LocalFile) string {
	if inf.Builtin {
		return ""
	}
	name := packages.Normalize(inf.Package)
	for _, f := range local {
		if f.Name != name || f.Origin != packages.OriginIndex {
			continue
		}
		mods, err := packages.WheelModules(f.Path)
		if err != nil {
			return fmt.Sprintf("%s %s: cannot read which modules %s provides (%v), so it is not installed for import %s", f.Name, f.Version, f.Filename, err, inf.Import)
		}
		if !mods[inf.Module()] {
			return fmt.Sprintf("%s %s: %s does not provide module %s, so it is not installed for import %s", f.Name, f.Version, f.Filename, inf.Module(), inf.Import)
		}
	}
	return ""
}

// importable adds to modules the top-level modules of wheels that a
// package offers: not private ones, nor tests. Shared libraries have none.
func importable(wheels []bridge.Payload, modules map[string]bool) error {
	for _, w := range wheels {
		if !strings.HasSuffix(w.Name, ".whl") {
			continue
		}
		mods, err := packages.WheelModules(w.Path)
		if err != nil {
			return fmt.Errorf("modules of %s: %w", w.Name, err)
		}
		offered(mods, modules)
	}
	return nil
}

// offered adds to modules those of mods that a package offers: not private
// ones, nor tests.
func offered(mods, modules map[string]bool) {
	for m := range mods {
		if !strings.HasPrefix(m, "_") && m != "tests" && m != "test" {
			modules[m] = true
		}
	}
}

// ResolveDeps resolves and fetches deps (--deps), holding each file in the
// cache with hold, pins the installer's --deps to what it resolved, and
// returns the set with the sha256 of each file.
func (in *Installer) ResolveDeps(ctx context.Context, deps []string, hold func(path string) (func(), error)) (*runtimefiles.Deps, []string, error) {
	plan, local, err := in.obtain(ctx, deps, nil, map[string]bool{}, nil, silent{})
	if err != nil {
		return nil, nil, err
	}
	files := map[string]bool{}
	wheels, err := in.wheels(local, files)
	if err != nil {
		return nil, nil, err
	}
	var sums, pins []string
	for _, f := range local {
		// Every worker gets them from the cache: keep them from a prune.
		if _, err := hold(f.Path); err != nil {
			return nil, nil, fmt.Errorf("hold %s in the cache: %w", f.Filename, err)
		}
		sums = append(sums, f.SHA256)
	}
	modules := map[string]bool{}
	if err := importable(wheels, modules); err != nil {
		return nil, nil, err
	}
	for _, f := range plan.Files {
		pins = append(pins, f.Name+"=="+f.Version)
	}
	in.pinDeps(pins)
	set := &runtimefiles.Deps{Wheels: wheels, Files: files, Modules: slices.Sorted(maps.Keys(modules))}
	return set, sums, nil
}

// Phase is a part of a call's install step, before its code runs:
// a call whose time ran out there says which.
type Phase int

// The phases of an install.
const (
	PhaseNone    Phase = iota // the install did not fail
	PhaseFetch                // resolving the requirements and downloading their files
	PhaseImports              // asking the worker what the code imports
	PhaseInstall              // sending the files to the worker
)

// String says what the call was doing, as in "its time ran out while
// installing packages".
func (p Phase) String() string {
	switch p {
	case PhaseNone:
		return ""
	case PhaseFetch:
		return "resolving and downloading packages"
	case PhaseImports:
		return "finding the code's imports"
	case PhaseInstall:
		return "installing packages"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}
