package packages

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	pep440 "github.com/aquasecurity/go-pep440-version"
	"golang.org/x/sync/singleflight"

	"github.com/mcp-run-python/mcp-run-python/supervisor/packages/pubgrub"
)

// Origin says where a plan's file comes from.
type Origin string

// The origins of a [PlanFile].
const (
	// OriginLock: a package Pyodide ships, listed in its lock file.
	OriginLock Origin = "lock"
	// OriginIndex: a wheel from the package index.
	OriginIndex Origin = "index"
)

// describe names the authority that gave a file's sha256.
func (o Origin) describe() string {
	if o == OriginLock {
		return "Pyodide lock file"
	}
	return "package index"
}

// Plan is the outcome of [Resolver.Resolve]: the files to install, each
// after the files it depends on.
type Plan struct {
	// Requirements are the requirement strings that were resolved.
	Requirements []string `json:"requirements"`
	// Files are in dependency order: install them front to back.
	Files []PlanFile `json:"files"`
	// Skipped are the requirements inferred from imports that
	// [Resolver.ResolveInferred] left out because no package provides them.
	Skipped []Skip `json:"skipped,omitempty"`
	// Warnings are for the person who asked, as pip prints them: extras
	// that the chosen version of a package does not declare.
	Warnings []string `json:"warnings,omitempty"`
}

// Skip is a requirement inferred from an import that a plan leaves out, and
// why: the error its lookup gave.
type Skip struct {
	Requirement string `json:"requirement"`
	Reason      string `json:"reason"`
}

// PlanFile is one file to install.
type PlanFile struct {
	// Name is the normalized package name.
	Name string `json:"name"`
	// Version is the chosen version.
	Version string `json:"version"`
	// Filename is the wheel's (or, for Pyodide's shared libraries and
	// unvendored tests, the zip's) file name.
	Filename string `json:"filename"`
	// Source is where to get it: an http(s) URL or a local path.
	Source string `json:"source"`
	// SHA256 is the hex sha256 the file must have.
	SHA256 string `json:"sha256"`
	// Size is the size in bytes when the index gave it, else 0.
	Size int64 `json:"size,omitempty"`
	// Origin says whether it comes from Pyodide's lock file or the index.
	Origin Origin `json:"origin"`
	// PackageType is the lock file's package_type (TypePackage,
	// TypeCPythonModule, TypeSharedLibrary); TypePackage for the index.
	PackageType string `json:"package_type"`
	// InstallDir is where Pyodide unpacks it: "site", "stdlib" or "dynlib".
	InstallDir string `json:"install_dir"`
	// Depends are the normalized names of the plan's packages this one
	// needs; they come earlier in Files.
	Depends []string `json:"depends,omitempty"`
}

// Config configures a [Resolver].
type Config struct {
	// Lock is Pyodide's lock file; its packages win over the index. Nil
	// means no built-in packages.
	Lock *Lock
	// PyodideURL is where the lock's files are: the directory or URL that
	// holds pyodide-lock.json and the wheels next to it. Required with Lock.
	PyodideURL string
	// IndexURL is a simple index (URL or directory); "" means only the
	// lock's packages can be installed.
	IndexURL string
	// Cache, if set, receives wheels downloaded to read their metadata (so
	// a later Fetch finds them) and keeps index pages; when it is offline
	// the resolver uses nothing but the cache, local directories and Lock:
	// it chooses among the versions whose files the cache holds, and a
	// pure-Python built-in whose lock file is not there comes from the
	// index, as when Pyodide's host is down (see WithoutPyodideHost).
	Cache *Cache
	// HTTPClient is used for index requests; nil means a default client.
	HTTPClient *http.Client
	// Progress receives progress lines; nil discards them.
	Progress func(msg string)
	// Environment overrides the marker environment (default: from Lock,
	// else Pyodide's CPython 3.14.2).
	Environment Environment
	// PlatformTags overrides the accepted wheel platform tags besides "any"
	// (default: Lock.PlatformTags()).
	PlatformTags []string
}

// Resolver turns requirement strings into a [Plan]. It is safe for
// concurrent use; each Resolve is independent (index pages are fetched
// anew for each), except that concurrent calls with the same requirements
// share one resolution.
//
// It chooses versions with PubGrub (package pubgrub): a complete search
// that backtracks, so that when "a" and "b" are required and b needs a<2 it
// picks an older a, and that explains in a few lines why nothing fits when
// nothing does. Index metadata is read lazily, for the versions tried.
// Pyodide's build of a package is used whenever its version satisfies
// every requirement on it, as micropip does; otherwise, for a pure-Python
// package only, a wheel from the index is.
type Resolver struct {
	lock      *Lock
	pyodide   *url.URL
	index     *Index
	cache     *Cache
	client    *http.Client
	progress  func(string)
	env       Environment
	tags      tagSet
	platforms []string
	flight    *singleflight.Group // shared by WithProgress's copies
	// noHost: Pyodide's package host cannot be reached, so pure-Python
	// built-ins not in the cache come from the index (see WithoutPyodideHost).
	noHost bool
}

// NewResolver checks cfg and returns a Resolver.
func NewResolver(cfg Config) (*Resolver, error) {
	r := &Resolver{lock: cfg.Lock, cache: cfg.Cache, client: cfg.HTTPClient, progress: cfg.Progress, flight: &singleflight.Group{}}
	if r.client == nil {
		r.client = newHTTPClient()
	}
	if cfg.Lock != nil {
		if cfg.PyodideURL == "" {
			return nil, fmt.Errorf("resolver: a lock file needs PyodideURL, where its files are")
		}
		u, err := parseLocation(cfg.PyodideURL)
		if err != nil {
			return nil, fmt.Errorf("resolver: Pyodide package host: %w", err)
		}
		r.pyodide = u
	}
	if cfg.IndexURL != "" {
		ix, err := NewIndex(cfg.IndexURL, r.client)
		if err != nil {
			return nil, fmt.Errorf("resolver: %w", err)
		}
		r.index = ix
	}
	switch {
	case cfg.Environment != nil:
		r.env = cfg.Environment
	case cfg.Lock != nil:
		r.env = cfg.Lock.Environment()
	default:
		r.env = PyodideEnvironment("3.14.2", "")
	}
	r.platforms = cfg.PlatformTags
	if r.platforms == nil && cfg.Lock != nil {
		r.platforms = cfg.Lock.PlatformTags()
	}
	r.tags = newTagSet(r.env["python_version"], r.platforms)
	return r, nil
}

// WithProgress returns a Resolver like r that sends progress lines to fn
// (nil discards them), so that each call's lines can go to that call.
func (r *Resolver) WithProgress(fn func(msg string)) *Resolver {
	cp := *r
	cp.progress = fn
	if cp.cache != nil {
		cp.cache = cp.cache.WithProgress(fn)
	}
	return &cp
}

// WithoutPyodideHost returns a Resolver like r for when Pyodide's package
// host cannot be reached: a pure-Python built-in whose lock file is not in
// the cache is resolved as an index package, so that a mirror of PyPI that
// has it (at a version every requirement allows) stands in for the host.
// Built-ins with native code still come from the host only. Its
// resolutions are shared with each other, not with r's.
func (r *Resolver) WithoutPyodideHost() *Resolver {
	cp := *r
	cp.noHost = true
	cp.flight = &singleflight.Group{}
	return &cp
}

// Resolve resolves PEP 508 requirement strings (requirements whose marker
// is false in Pyodide are dropped) into a plan of files to install, each
// after its dependencies. Failures are [*Error]s naming the requirement
// and why, e.g. KindNotFound, KindNoCompatibleWheel, KindConflict (with
// the solver's explanation when no combination of versions fits),
// KindUnreachable, KindOfflineMiss, KindInvalid.
//
// Concurrent calls with the same requirements share one resolution: the
// later ones wait for the first and get its plan (or error).
func (r *Resolver) Resolve(ctx context.Context, reqs []string) (Plan, error) {
	if len(reqs) == 0 {
		return Plan{Requirements: slices.Clone(reqs)}, nil
	}
	return r.shared(ctx, strings.Join(reqs, "\n"), reqs, nil)
}

// ResolveInferred resolves reqs as [Resolve] does, together with inferred:
// requirements inferred from the modules code imports. An inferred
// requirement that names no package the lock or the index can give is
// left out and listed in Plan.Skipped instead of failing the resolution:
// Python raises ImportError only if that import really runs, and code
// often guards one (`try: import cPickle as pickle` / `except ImportError:
// import pickle`, imports under `if TYPE_CHECKING:`), as Pyodide's own
// import loader skips names it does not know.
//
// Left out are the lookups that fail with KindNotFound (no such project,
// no files), KindNoCompatibleWheel (the project exists but has no wheel
// Pyodide can run: `try: import ujson` / `except ImportError: import json`
// is the same guard) and KindOfflineMiss (offline, the cache is the whole
// index: a name it never saw is a name it does not have). Everything else
// stays an error, because it says nothing about whether a package provides
// the module, or says that one does and cannot be installed: an unreachable
// index (an outage must not turn into ImportErrors that look like a missing
// package), a hash mismatch, a conflict between versions, and any failure
// in the dependencies of a package that was found.
func (r *Resolver) ResolveInferred(ctx context.Context, reqs, inferred []string) (Plan, error) {
	if len(inferred) == 0 {
		return r.Resolve(ctx, reqs)
	}
	key := strings.Join(reqs, "\n") + "\n\x00inferred\n" + strings.Join(inferred, "\n")
	return r.shared(ctx, key, reqs, inferred)
}

// shared resolves, sharing the work with concurrent calls of the same key.
func (r *Resolver) shared(ctx context.Context, key string, reqs, inferred []string) (Plan, error) {
	leader := false
	ch := r.flight.DoChan(key, func() (any, error) {
		leader = true
		return r.resolve(ctx, reqs, inferred)
	})
	var res singleflight.Result
	select {
	case <-ctx.Done():
		return Plan{}, ctx.Err()
	case res = <-ch:
	}
	all := append(slices.Clone(reqs), inferred...)
	if !leader {
		if res.Err != nil && ctx.Err() == nil && (errors.Is(res.Err, context.Canceled) || errors.Is(res.Err, context.DeadlineExceeded)) {
			// The call this one waited for was cancelled; this one was not.
			return r.resolve(ctx, reqs, inferred)
		}
		if r.progress != nil {
			r.progress("resolved " + strings.Join(all, ", ") + " (together with a concurrent call)")
		}
	}
	if res.Err != nil {
		return Plan{}, res.Err
	}
	plan := res.Val.(Plan)
	plan.Requirements = slices.Clone(plan.Requirements)
	plan.Files = slices.Clone(plan.Files)
	plan.Skipped = slices.Clone(plan.Skipped)
	plan.Warnings = slices.Clone(plan.Warnings)
	for i := range plan.Files {
		plan.Files[i].Depends = slices.Clone(plan.Files[i].Depends)
	}
	return plan, nil
}

// skippable reports whether a failed lookup of an inferred requirement
// means that no package provides the module (see ResolveInferred).
func skippable(err error) bool {
	switch KindOf(err) {
	case KindNotFound, KindNoCompatibleWheel, KindOfflineMiss:
		return true
	}
	return false
}

// resolve is Resolve (and ResolveInferred) without the sharing.
func (r *Resolver) resolve(ctx context.Context, reqs, inferred []string) (Plan, error) {
	start := time.Now()
	s := newResolution(r)
	all := append(slices.Clone(reqs), inferred...)
	s.say("resolving %s", strings.Join(all, ", "))
	var top []work
	firm := map[string]bool{}
	var skipped []Skip
	for i, text := range all {
		req, err := ParseRequirement(text)
		if err != nil {
			return Plan{}, newError(text, KindInvalid, nil, "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid requirement %q: ", text)))
		}
		if req.Marker != nil && !req.Marker.Evaluate(s.envWith("")) {
			s.say("%s: skipped, its marker is false in Pyodide", text)
			continue
		}
		if Normalize(req.Name) == pythonPackage {
			if py := r.env["python_full_version"]; !req.Specifier.Allows(py) {
				return Plan{}, newError(text, KindConflict, nil, "requires Python %s, but Pyodide runs Python %s", req.Specifier, py)
			}
			continue
		}
		name := Normalize(req.Name)
		if i < len(reqs) {
			firm[name] = true
		} else if _, builtin := r.lockPackage(name); !builtin && !firm[name] {
			// An inferred requirement: looked up now, and left out when no
			// package provides it.
			w := work{req: req}
			if _, ok := s.by[name]; !ok {
				s.by[name] = w
			}
			if _, err := s.Versions(ctx, name); err != nil {
				if ctx.Err() != nil {
					return Plan{}, ctx.Err()
				}
				if !skippable(err) {
					return Plan{}, err
				}
				delete(s.by, name)
				delete(s.versions, name)
				skipped = append(skipped, Skip{Requirement: text, Reason: err.Error()})
				continue
			}
		}
		top = append(top, work{req: req})
	}
	if len(top) == 0 {
		return Plan{Requirements: all, Skipped: skipped}, nil
	}
	root, err := s.requirements(top)
	if err != nil {
		return Plan{}, err
	}
	for {
		sol, err := pubgrub.Solve(ctx, s, root)
		var ns *pubgrub.NoSolution
		switch {
		case err == nil:
			plan := Plan{Requirements: all, Files: s.plan(sol, top), Skipped: skipped, Warnings: s.warnings(sol)}
			s.say("resolved %d package(s) in %s", len(plan.Files), time.Since(start).Round(time.Millisecond))
			return plan, nil
		case ctx.Err() != nil:
			return Plan{}, ctx.Err()
		case !errors.As(err, &ns):
			var e *Error
			if errors.As(err, &e) {
				return Plan{}, e
			}
			return Plan{}, err
		}
		if !s.expandContested() {
			return Plan{}, s.noSolution(ns, top, reqs)
		}
		// Solve again with the index's versions of the built-ins asked for
		// at other versions; what was read so far stays known.
		clear(s.versions)
	}
}

// warnings are the plan's warnings about the solution sol, in order.
func (s *resolution) warnings(sol map[string]string) []string {
	var out []string
	for pkg, v := range sol {
		if s.unknownExtra[pkg+" "+v] {
			name, extra := splitExtra(pkg)
			out = append(out, fmt.Sprintf("warning: %s %s does not provide the extra %q", name, v, extra))
		}
	}
	slices.Sort(out)
	return out
}

// expandContested lists the index versions of the contested pure-Python
// built-ins from now on; it reports whether there were new ones.
func (s *resolution) expandContested() bool {
	if s.r.index == nil {
		return false
	}
	more := false
	for name := range s.contested {
		if lp, _ := s.r.lockPackage(name); !s.expanded[name] && !s.r.builtinIsNative(lp) {
			s.expanded[name] = true
			more = true
		}
	}
	return more
}

// noSolution explains a failed solve: by the simplest cause found (a
// requirement no version matches, a built-in that cannot be replaced), else
// with the solver's explanation.
func (s *resolution) noSolution(ns *pubgrub.NoSolution, top []work, reqs []string) error {
	for _, w := range top {
		name := Normalize(w.req.Name)
		if lp, builtin := s.r.lockPackage(name); builtin {
			if vs, asked := s.versions[name]; asked && s.r.offline() && s.r.mirrored(name, lp) && !slices.ContainsFunc(vs, s.set(name, w).Contains) {
				return s.offlineBuiltinMiss(name, lp, w, w.req.Text)
			}
			continue
		}
		set := s.set(name, w)
		if slices.ContainsFunc(s.versions[name], set.Contains) {
			continue
		}
		var matching []*candidate
		for _, c := range s.cands[name] {
			if w.req.Specifier.allows(c.version, c.text) {
				matching = append(matching, c)
			}
		}
		if len(matching) > 0 && !slices.ContainsFunc(matching, func(c *candidate) bool { return len(c.usable) > 0 }) {
			return s.noUsableFile(name, matching, w)
		}
		return newError(w.req.Text, KindNotFound, nil, "no version of %s matches %s (available: %s)",
			name, w.req.Specifier, availableVersions(s.cands[name]))
	}
	names := make([]string, 0, len(s.contested))
	for name := range s.contested {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, native := range []bool{true, false} {
		for _, name := range names {
			lp, _ := s.r.lockPackage(name)
			w := s.contested[name]
			if s.r.builtinIsNative(lp) != native {
				continue
			}
			if native {
				return newError(w.req.Text, KindConflict, nil, "Pyodide ships %s %s; only its build can be installed, and it does not satisfy %q%s",
					name, lp.Version, w.req.Text, byText(w))
			}
			if set := s.set(name, w); !slices.ContainsFunc(s.versions[name], set.Contains) {
				where := "and no package index is configured"
				switch {
				case s.r.index != nil && s.r.offline():
					where = "and the package cache holds no version of it from the index that does (offline mode)"
				case s.r.index != nil:
					where = "and the index has no version of it that does"
				}
				return newError(w.req.Text, KindConflict, nil, "Pyodide ships %s %s, which does not satisfy %q%s, %s",
					name, lp.Version, w.req.Text, byText(w), where)
			}
		}
	}
	return newError(strings.Join(reqs, ", "), KindConflict, nil, "no set of versions satisfies every requirement:\n%s", ns.Explain())
}

// lockFile is the plan file of a built-in package.
func (s *resolution) lockFile(name string, lp *LockPackage) PlanFile { return s.r.lockFile(name, lp) }

func (r *Resolver) lockFile(name string, lp *LockPackage) PlanFile {
	src := r.pyodide.ResolveReference(&url.URL{Path: url.PathEscape(lp.FileName)})
	return PlanFile{
		Name: name, Version: lp.Version, Filename: lp.FileName, Source: sourceString(src),
		SHA256: lp.SHA256, Origin: OriginLock, PackageType: lp.PackageType, InstallDir: lp.InstallDir,
	}
}

// plan lists the files of a solution, dependencies first (a cycle is
// broken where it was entered), otherwise in the order of the requirements
// that brought them in.
func (s *resolution) plan(sol map[string]string, top []work) []PlanFile {
	// The dependencies of each real package, its chosen extras' included.
	deps := map[string][]string{}
	var extras []string
	for pkg, v := range sol {
		name, extra := splitExtra(pkg)
		switch {
		case pkg == pythonPackage:
		case extra != "":
			extras = append(extras, pkg)
		default:
			deps[name] = append(deps[name], s.deps[pkg+" "+v]...)
		}
	}
	sort.Strings(extras)
	for _, pkg := range extras {
		name, _ := splitExtra(pkg)
		for _, d := range s.deps[pkg+" "+sol[pkg]] {
			if d != name && !slices.Contains(deps[name], d) {
				deps[name] = append(deps[name], d)
			}
		}
	}
	var out []PlanFile
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string)
	visit = func(name string) {
		if state[name] != 0 {
			return
		}
		state[name] = 1
		var ds []string
		for _, d := range deps[name] {
			if _, ok := deps[d]; ok {
				ds = append(ds, d)
				visit(d)
			}
		}
		state[name] = 2
		f := s.file(name, sol[name])
		f.Depends = ds
		out = append(out, f)
	}
	for _, w := range top {
		visit(Normalize(w.req.Name))
	}
	rest := make([]string, 0, len(deps))
	for name := range deps {
		rest = append(rest, name)
	}
	sort.Strings(rest)
	for _, name := range rest {
		visit(name)
	}
	return out
}

// file is the plan file of name v: the lock's for a built-in at its lock
// version, else the index file whose metadata was read.
func (s *resolution) file(name, v string) PlanFile {
	if lp, ok := s.r.lockBuild(name, v); ok {
		s.say("%s %s: built into Pyodide", name, v)
		return s.lockFile(name, lp)
	}
	f := s.candidate(name, v).usable[0]
	s.say("%s %s: from the index (%s)", name, v, f.Filename)
	return PlanFile{
		Name: name, Version: v, Filename: f.Filename, Source: f.URL, SHA256: f.SHA256,
		Size: f.Size, Origin: OriginIndex, PackageType: TypePackage, InstallDir: "site",
	}
}

// project gets a project's index page, from the cache when offline.
func (s *resolution) project(ctx context.Context, name string, w work) (*Project, error) {
	if p, ok := s.projects[name]; ok {
		return p, nil
	}
	ix := s.r.index
	var p *Project
	var err error
	if ix.remote() && s.r.cache != nil && s.r.cache.Offline() {
		p, err = s.r.cache.loadProject(ix.String(), name)
		if errors.Is(err, errNotFound) {
			// Kept from the index used online, when that was another (the
			// server now runs without its --index-url, say).
			if p, err = s.r.cache.loadAnyProject(name); err == nil {
				s.say("%s: the package cache has no index page for it from %s; using the one kept from another index", name, ix)
			}
		}
		if errors.Is(err, errNotFound) {
			return nil, newError(w.req.Text, KindOfflineMiss, nil,
				"offline mode, and the package cache has no index page for %s (from %s)%s", name, ix, byText(w))
		}
	} else {
		p, err = ix.Project(ctx, name)
		// A local directory's pages are kept too: offline, the server
		// may run without that --index-url, as with an HTTP one.
		if err == nil && s.r.cache != nil {
			if serr := s.r.cache.saveProject(ix.String(), p); serr != nil {
				s.say("warning: could not keep the index page of %s: %v", name, serr)
			}
		}
	}
	if err != nil {
		var ue *UnreachableError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrProjectNotFound):
			return nil, newError(w.req.Text, KindNotFound, nil, "no package named %s on the index %s%s", name, ix, byText(w))
		case errors.As(err, &ue):
			return nil, unreachable(w.req.Text, OriginIndex, err, "cannot look up %s%s", name, byText(w))
		}
		return nil, unreachable(w.req.Text, OriginIndex, err, "cannot read the index page of %s%s", name, byText(w))
	}
	s.projects[name] = p
	return p, nil
}

// candidate is one version on the index with its usable wheels.
type candidate struct {
	version  pep440.Version
	text     string
	usable   []IndexFile // compatible wheels, best first (yanked last)
	rejected []string    // why other files of this version are not usable
}

// yankedOnly reports whether every usable file of c is yanked: PEP 592
// allows it then only for a pinned requirement.
func (c *candidate) yankedOnly() bool {
	return len(c.usable) > 0 && c.usable[0].Yanked
}

// Reasons a file is not usable that call for a hint on what Pyodide needs.
const (
	whySdist    = "a source distribution, not a wheel"
	whyPlatform = "built for another platform"
	whyOffline  = "not in the package cache (offline mode)"
)

// candidates groups a project's files by version and sorts out which
// wheels are usable.
func (s *resolution) candidates(name string, proj *Project) []*candidate {
	byVersion := map[string]*candidate{}
	var out []*candidate
	pyFull := s.r.env["python_full_version"]
	for _, f := range proj.Files {
		verText, w, isWheel := fileVersion(f.Filename, name)
		if verText == "" {
			continue
		}
		v, err := pep440.Parse(verText)
		if err != nil {
			continue
		}
		key := v.String()
		c := byVersion[key]
		if c == nil {
			c = &candidate{version: v, text: verText}
			byVersion[key] = c
			out = append(out, c)
		}
		reject := func(why string) { c.rejected = append(c.rejected, f.Filename+": "+why) }
		switch {
		case !isWheel:
			reject(whySdist)
			continue
		case s.r.tags.rank(w) < 0:
			reject(whyPlatform)
			continue
		case !sha256RE.MatchString(f.SHA256):
			reject("the index gives no sha256 for it")
			continue
		case s.r.offline() && !s.r.cache.Has(PlanFile{Filename: f.Filename, SHA256: f.SHA256}):
			// Offline, the cache is the whole index: the versions it holds
			// are the ones there are.
			reject(whyOffline)
			continue
		}
		if f.RequiresPython != "" {
			if rp, err := ParseSpecifier(f.RequiresPython); err == nil && !rp.Allows(pyFull) {
				reject("requires Python " + f.RequiresPython)
				continue
			}
		}
		c.usable = append(c.usable, f)
	}
	for _, c := range out {
		sort.SliceStable(c.usable, func(i, j int) bool {
			a, b := c.usable[i], c.usable[j]
			if a.Yanked != b.Yanked {
				return !a.Yanked
			}
			wa, _ := parseWheelName(a.Filename)
			wb, _ := parseWheelName(b.Filename)
			return s.r.tags.rank(wa) < s.r.tags.rank(wb)
		})
	}
	return out
}

// fileVersion returns the version in a wheel or sdist name of project
// name ("" when the file is not one of its distributions), and the parsed
// wheel name for wheels.
func fileVersion(filename, name string) (string, wheelName, bool) {
	if w, ok := parseWheelName(filename); ok {
		if Normalize(w.name) != name {
			return "", wheelName{}, false
		}
		return w.version, w, true
	}
	for _, ext := range []string{".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar"} {
		if base, ok := strings.CutSuffix(filename, ext); ok {
			// The name part may itself contain "-": the version is after
			// the last "-" that leaves a name matching the project.
			for i := strings.LastIndex(base, "-"); i > 0; i = strings.LastIndex(base[:i], "-") {
				if Normalize(base[:i]) == name {
					return base[i+1:], wheelName{}, false
				}
			}
		}
	}
	return "", wheelName{}, false
}

// indexMetadata reads a wheel's metadata: PEP 658 when offered (and not
// offline), else from the wheel, through the cache when there is one.
func (s *resolution) indexMetadata(ctx context.Context, name, version string, f IndexFile, w work) (*Metadata, error) {
	offline := s.r.offline()
	if f.MetadataURL != "" && !(offline && isRemote(f.MetadataURL)) {
		s.say("reading the metadata of %s %s", name, version)
		md, err := s.r.index.coreMetadata(ctx, f)
		if err == nil {
			return md, nil
		}
		if !errors.Is(err, errNotFound) {
			return nil, s.metadataError(ctx, w, name, version, f.Filename, OriginIndex, err)
		}
	}
	pf := PlanFile{Name: name, Version: version, Filename: f.Filename, Source: f.URL, SHA256: f.SHA256,
		Size: f.Size, Origin: OriginIndex}
	md, err := s.wheelMetadata(ctx, pf, w)
	if err != nil {
		return nil, err
	}
	return md, nil
}

// wheelMetadata reads METADATA from inside a wheel, fetched through the
// cache when there is one (so that installing it later is a cache hit),
// else into memory; either way checked against its sha256.
func (s *resolution) wheelMetadata(ctx context.Context, f PlanFile, w work) (*Metadata, error) {
	s.say("reading the metadata of %s %s from %s", f.Name, f.Version, f.Filename)
	if s.r.cache != nil {
		lf, err := s.r.cache.FetchFile(ctx, f)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Requirement = w.req.Text
			}
			return nil, err
		}
		zr, err := zip.OpenReader(lf.Path)
		if err != nil {
			return nil, s.metadataError(ctx, w, f.Name, f.Version, f.Filename, f.Origin, err)
		}
		defer zr.Close()
		md, err := metadataFromZip(&zr.Reader, f.Name)
		if err != nil {
			return nil, s.metadataError(ctx, w, f.Name, f.Version, f.Filename, f.Origin, err)
		}
		return md, nil
	}
	data, err := fetchVerified(ctx, s.r.client, f.Source, f.SHA256, f.Size, maxWheelSize)
	if err != nil {
		return nil, s.metadataError(ctx, w, f.Name, f.Version, f.Filename, f.Origin, err)
	}
	md, err := wheelMetadata(bytes.NewReader(data), int64(len(data)), f.Name)
	if err != nil {
		return nil, s.metadataError(ctx, w, f.Name, f.Version, f.Filename, f.Origin, err)
	}
	return md, nil
}

func (s *resolution) metadataError(ctx context.Context, w work, name, version, filename string, origin Origin, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var he *hashError
	var ue *UnreachableError
	switch {
	case errors.As(err, &he):
		return newError(w.req.Text, KindHashMismatch, nil, "%s has sha256 %s, but the %s says %s; the file was discarded",
			he.file, he.got, origin.describe(), he.want)
	case errors.As(err, &ue):
		return unreachable(w.req.Text, origin, err, "cannot read the metadata of %s %s%s", name, version, byText(w))
	case errors.Is(err, errNotFound):
		return newError(w.req.Text, KindNotFound, err, "%s is listed but missing%s", filename, byText(w))
	}
	return newError(w.req.Text, KindNoCompatibleWheel, err, "cannot read the metadata of %s %s%s", name, version, byText(w))
}

func (s *resolution) platformText() string {
	if len(s.r.platforms) == 0 {
		return "Pyodide"
	}
	return s.r.platforms[0]
}

func availableVersions(cands []*candidate) string {
	sorted := slices.Clone(cands)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].version.LessThan(sorted[j].version) })
	var vs []string
	for _, c := range sorted {
		vs = append(vs, c.text)
	}
	if len(vs) > 10 {
		vs = append([]string{"..."}, vs[len(vs)-10:]...)
	}
	return strings.Join(vs, ", ")
}

func describeMatching(m []*candidate) string {
	if len(m) == 1 {
		return m[0].text
	}
	return fmt.Sprintf("%s (or any of %d other matching versions)", m[0].text, len(m)-1)
}

func summarize(items []string, max int) string {
	if len(items) == 0 {
		return "no files"
	}
	if len(items) > max {
		return strings.Join(items[:max], "; ") + fmt.Sprintf("; and %d more", len(items)-max)
	}
	return strings.Join(items, "; ")
}
