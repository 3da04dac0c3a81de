package packages

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	pep440 "github.com/aquasecurity/go-pep440-version"

	"github.com/mcp-run-python/mcp-run-python/supervisor/packages/pubgrub"
)

// pythonPackage is the virtual package that stands for the interpreter:
// its one version is Pyodide's Python, and a Requires-Python (of a wheel,
// or a script's PEP 723 requires-python, see [FromCode]) is a dependency
// on it, as uv models it.
const pythonPackage = "python"

// resolution is the state of one Resolve call and the [pubgrub.Provider]
// it solves with. Packages are normalized names; "name[extra]" is the
// virtual package of an extra, whose version v depends on name ==v and on
// the requirements the extra adds.
//
// Pyodide's built-in packages list only their lock version at first, so
// that they are used whenever that is allowed (as micropip does). A pure-
// Python built-in whose lock version a requirement excludes is "contested";
// when the solve then fails it is expanded (its versions on the index are
// listed too) and the solve runs again.
type resolution struct {
	r *Resolver

	projects map[string]*Project
	cands    map[string][]*candidate // every version on the index, newest first
	versions map[string][]string     // Versions' answers, for the current solve
	meta     map[string]*Metadata    // by "name version"
	deps     map[string][]string     // real packages "name version" depends on
	// by is the first requirement that named each package.
	by map[string]work
	// expanded are pure-Python built-ins whose index versions are listed.
	expanded map[string]bool
	// contested are built-ins whose lock version a requirement excludes,
	// each with the first such requirement.
	contested map[string]work
	// unknownExtra are the "name[extra] version"s whose package declares
	// no such extra.
	unknownExtra map[string]bool
}

func newResolution(r *Resolver) *resolution {
	return &resolution{
		r:         r,
		projects:  map[string]*Project{},
		cands:     map[string][]*candidate{},
		versions:  map[string][]string{},
		meta:      map[string]*Metadata{},
		deps:      map[string][]string{},
		by:        map[string]work{},
		expanded:  map[string]bool{},
		contested: map[string]work{},

		unknownExtra: map[string]bool{},
	}
}

// work is a requirement and who asked for it ("" for the caller, else
// "name version").
type work struct {
	req Requirement
	by  string
}

// byText is " (required by NAME VERSION)", or "" for the caller's own
// requirements.
func byText(w work) string {
	if w.by == "" {
		return ""
	}
	return " (required by " + w.by + ")"
}

func (s *resolution) say(format string, args ...any) {
	if s.r.progress != nil {
		s.r.progress(fmt.Sprintf(format, args...))
	}
}

func (s *resolution) envWith(extra string) Environment {
	env := make(Environment, len(s.r.env)+1)
	for k, v := range s.r.env {
		env[k] = v
	}
	env["extra"] = extra
	return env
}

// splitExtra splits "name[extra]" into name and extra ("" for a real
// package).
func splitExtra(pkg string) (name, extra string) {
	if base, rest, ok := strings.Cut(pkg, "["); ok {
		return base, strings.TrimSuffix(rest, "]")
	}
	return pkg, ""
}

// builtinIsNative reports whether only Pyodide's build of a lock package
// can be installed: it is not a plain package, its wheel is not pure
// Python, or it links one of Pyodide's shared libraries.
func (r *Resolver) builtinIsNative(lp *LockPackage) bool {
	if lp.PackageType != TypePackage {
		return true
	}
	w, ok := parseWheelName(lp.FileName)
	if !ok {
		return true
	}
	for _, t := range w.tags {
		if !strings.HasSuffix(t, "-none-any") {
			return true
		}
	}
	for _, d := range lp.Depends {
		if dp, ok := r.lockPackage(Normalize(d)); ok && dp.PackageType == TypeSharedLibrary {
			return true
		}
	}
	return false
}

func (r *Resolver) lockPackage(name string) (*LockPackage, bool) {
	if r.lock == nil {
		return nil, false
	}
	return r.lock.Package(name)
}

// lockBuild returns name's lock package when version v of it means
// Pyodide's build: v is the lock version and that build is not mirrored.
func (r *Resolver) lockBuild(name, v string) (*LockPackage, bool) {
	lp, ok := r.lockPackage(name)
	if !ok || lp.Version != v || r.mirrored(name, lp) {
		return nil, false
	}
	return lp, true
}

// mirrored reports whether a built-in is taken from the index because
// Pyodide's package host is down (see [Resolver.WithoutPyodideHost]) or
// the resolver is offline, and its lock file is not in the cache: offline,
// the index's build that stood in for the host earlier is what there is.
func (r *Resolver) mirrored(name string, lp *LockPackage) bool {
	return (r.noHost || r.offline()) && !r.builtinIsNative(lp) && (r.cache == nil || !r.cache.Has(r.lockFile(name, lp)))
}

// offline reports whether the resolver may use nothing but the cache.
func (r *Resolver) offline() bool { return r.cache != nil && r.cache.Offline() }

// Versions implements [pubgrub.Provider].
func (s *resolution) Versions(ctx context.Context, pkg string) ([]string, error) {
	if vs, ok := s.versions[pkg]; ok {
		return vs, nil
	}
	var vs []string
	name, extra := splitExtra(pkg)
	switch lp, builtin := s.r.lockPackage(name); {
	case extra != "":
		var err error
		if vs, err = s.Versions(ctx, name); err != nil {
			return nil, err
		}
	case pkg == pythonPackage:
		vs = []string{s.r.env["python_full_version"]}
	case builtin && !s.r.mirrored(name, lp):
		vs = []string{lp.Version}
		if s.expanded[name] {
			vs = s.withIndexVersions(ctx, name, lp.Version)
		}
	default:
		cands, err := s.indexCandidates(ctx, name)
		for _, c := range cands {
			if len(c.usable) > 0 {
				vs = append(vs, c.text)
			}
		}
		if err == nil && len(vs) == 0 {
			err = s.noUsableFile(name, cands, s.by[name])
		}
		if err != nil && builtin && s.r.offline() && ctx.Err() == nil {
			return nil, s.offlineBuiltinMiss(name, lp, s.by[name], "")
		}
		if err != nil {
			return nil, err
		}
		if builtin {
			// A mirrored built-in: the index's build of the version Pyodide
			// ships, when it has one, is the closest stand-in.
			if i := slices.Index(vs, lp.Version); i > 0 {
				vs = slices.Insert(slices.Delete(vs, i, i+1), 0, lp.Version)
			}
		}
	}
	s.versions[pkg] = vs
	return vs, nil
}

// offlineBuiltinMiss is the error of a pure-Python built-in that the
// cache holds in no usable build, offline: it names Pyodide's build, the
// file a user would expect there, and what the index's would have to
// satisfy ("" for any).
func (s *resolution) offlineBuiltinMiss(name string, lp *LockPackage, w work, satisfy string) error {
	if satisfy != "" {
		satisfy = fmt.Sprintf(" that satisfies %q", satisfy)
	}
	return newError(w.req.Text, KindOfflineMiss, nil, "offline mode, and %s is not in the package cache %s, nor a build of %s from the index%s%s",
		s.r.lockFile(name, lp).Filename, s.r.cache.Dir(), name, satisfy, byText(w))
}

// withIndexVersions lists a pure-Python built-in's lock version with the
// index's usable versions, newest first (the lock's build wins a tie). An
// index that does not have it, or cannot be read, leaves the lock version.
func (s *resolution) withIndexVersions(ctx context.Context, name, lockVersion string) []string {
	lv, err := pep440.Parse(lockVersion)
	if err != nil {
		return []string{lockVersion}
	}
	cands, err := s.indexCandidates(ctx, name)
	if err != nil {
		s.say("%s: only Pyodide's build %s can be used: %v", name, lockVersion, err)
		return []string{lockVersion}
	}
	vs := []string{lockVersion}
	placed := false
	var out []string
	for _, c := range cands {
		if len(c.usable) == 0 || c.version.Equal(lv) {
			continue
		}
		if !placed && lv.GreaterThan(c.version) {
			out, placed = append(out, lockVersion), true
		}
		out = append(out, c.text)
	}
	if !placed {
		out = append(out, lockVersion)
	}
	if len(out) > len(vs) {
		s.say("%s: Pyodide's build %s does not satisfy %s; the index's versions are considered too",
			name, lockVersion, s.contested[name].req.Text)
	}
	return out
}

// indexCandidates returns the versions of name on the index, newest first.
func (s *resolution) indexCandidates(ctx context.Context, name string) ([]*candidate, error) {
	if c, ok := s.cands[name]; ok {
		return c, nil
	}
	w := s.by[name]
	if s.r.index == nil {
		return nil, newError(w.req.Text, KindNotFound, nil, "%s is not a Pyodide package and no package index is configured%s", name, byText(w))
	}
	proj, err := s.project(ctx, name, w)
	if err != nil {
		return nil, err
	}
	cands := s.candidates(name, proj)
	if len(cands) == 0 {
		return nil, newError(w.req.Text, KindNotFound, nil, "the index %s lists no files for %s%s", s.r.index, name, byText(w))
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].version.GreaterThan(cands[j].version) })
	s.cands[name] = cands
	return cands, nil
}

// candidate returns name's index version v, or nil.
func (s *resolution) candidate(name, v string) *candidate {
	for _, c := range s.cands[name] {
		if c.text == v {
			return c
		}
	}
	return nil
}

// noUsableFile explains why none of cands (all of them, or those a
// requirement allows) can be installed.
func (s *resolution) noUsableFile(name string, cands []*candidate, w work) error {
	var tried, uncached []string
	for _, c := range cands {
		tried = append(tried, c.rejected...)
		for _, why := range c.rejected {
			if file, ok := strings.CutSuffix(why, ": "+whyOffline); ok {
				uncached = append(uncached, file)
			}
		}
	}
	// Offline, a wheel that is not in the cache would be the one to use.
	switch {
	case len(uncached) == 1:
		return newError(w.req.Text, KindOfflineMiss, nil, "offline mode, and %s is not in the package cache %s%s",
			uncached[0], s.r.cache.Dir(), byText(w))
	case len(uncached) > 1:
		return newError(w.req.Text, KindOfflineMiss, nil, "offline mode, and no file of %s %s is in the package cache %s%s (%s)",
			name, describeMatching(cands), s.r.cache.Dir(), byText(w), summarize(uncached, 6))
	}
	hint := ""
	for _, why := range tried {
		if strings.HasSuffix(why, whyPlatform) || strings.HasSuffix(why, whySdist) {
			hint = fmt.Sprintf("; Pyodide needs pure-Python wheels (py3-none-any) or wheels built for %s", s.platformText())
			break
		}
	}
	return newError(w.req.Text, KindNoCompatibleWheel, nil,
		"no file of %s %s can be installed in Pyodide%s (%s)%s",
		name, describeMatching(cands), byText(w), summarize(tried, 6), hint)
}

// set is the pubgrub set of the versions of name that w's specifier
// allows, with PEP 440's rules: pre-releases only when the specifier names
// one or no final version matches, and yanked versions only when pinned.
func (s *resolution) set(name string, w work) pubgrub.Set {
	spec := w.req.Specifier
	pinned, pre := spec.pinned(), spec.Prereleases()
	usable := func(v string) bool {
		if !spec.Allows(v) {
			return false
		}
		c := s.candidate(name, v)
		return c == nil || pinned || !c.yankedOnly()
	}
	return pubgrub.NewSet(spec.String(), func(v string) bool {
		if !usable(v) {
			return false
		}
		if pre || !isPreRelease(v) {
			return true
		}
		// A pre-release, allowed when no final version is.
		for _, o := range s.versions[name] {
			if !isPreRelease(o) && usable(o) {
				return false
			}
		}
		return true
	})
}

func isPreRelease(v string) bool {
	pv, err := pep440.Parse(v)
	return err == nil && pv.IsPreRelease()
}

// requirements turns requirements into dependencies: each on its package
// and, for each extra, on "name[extra]". It notes who named each package
// first, and built-ins whose lock version a requirement excludes.
func (s *resolution) requirements(ws []work) ([]pubgrub.Dependency, error) {
	var out []pubgrub.Dependency
	for _, w := range ws {
		if w.req.URL != "" {
			return nil, newError(w.req.Text, KindInvalid, nil, "direct URL references are not supported; name a package from the index%s", byText(w))
		}
		name := Normalize(w.req.Name)
		if _, ok := s.by[name]; !ok {
			s.by[name] = w
		}
		if lp, ok := s.r.lockPackage(name); ok && !w.req.Specifier.Allows(lp.Version) {
			if _, seen := s.contested[name]; !seen {
				s.contested[name] = w
			}
		}
		set := s.set(name, w)
		out = append(out, pubgrub.Dependency{Package: name, Allowed: set})
		for _, e := range w.req.Extras {
			out = append(out, pubgrub.Dependency{Package: name + "[" + Normalize(e) + "]", Allowed: set})
		}
	}
	return out, nil
}

// Dependencies implements [pubgrub.Provider].
func (s *resolution) Dependencies(ctx context.Context, pkg, v string) ([]pubgrub.Dependency, error) {
	name, extra := splitExtra(pkg)
	if pkg == pythonPackage {
		return nil, nil
	}
	by := name + " " + v
	key := pkg + " " + v
	lp, builtin := s.r.lockBuild(name, v)
	var ws []work
	var deps []pubgrub.Dependency
	switch {
	case extra != "":
		deps = append(deps, pubgrub.Dependency{Package: name, Allowed: pubgrub.Exactly(v)})
		md, err := s.metadata(ctx, name, v)
		if err != nil {
			return nil, err
		}
		if ws, err = s.metadataRequirements(md, by, extra); err != nil {
			return nil, err
		}
		if len(ws) == 0 && !slices.ContainsFunc(md.ProvidesExtra, func(e string) bool { return Normalize(e) == extra }) {
			s.unknownExtra[key] = true
		}
	case builtin:
		for _, d := range lp.Depends {
			ws = append(ws, work{req: Requirement{Name: d, Text: d}, by: by})
		}
	default:
		md, err := s.metadata(ctx, name, v)
		if err != nil {
			return nil, err
		}
		if md.RequiresPython != "" {
			if rp, err := ParseSpecifier(md.RequiresPython); err == nil {
				deps = append(deps, pubgrub.Dependency{Package: pythonPackage, Allowed: pubgrub.NewSet(rp.String(), rp.Allows)})
			}
		}
		if ws, err = s.metadataRequirements(md, by, ""); err != nil {
			return nil, err
		}
	}
	var names []string
	for _, w := range ws {
		if d := Normalize(w.req.Name); d != name && !slices.Contains(names, d) {
			names = append(names, d)
		}
	}
	s.deps[key] = names
	more, err := s.requirements(ws)
	if err != nil {
		return nil, err
	}
	// A package that names itself (with extras, say) needs nothing more.
	more = slices.DeleteFunc(more, func(d pubgrub.Dependency) bool { return d.Package == name })
	return append(deps, more...), nil
}

// metadataRequirements returns the Requires-Dist entries of md that apply
// in Pyodide: with extra "", those whose marker holds without an extra;
// else those that hold only with this extra.
func (s *resolution) metadataRequirements(md *Metadata, by, extra string) ([]work, error) {
	var ws []work
	for _, text := range md.RequiresDist {
		req, err := ParseRequirement(text)
		if err != nil {
			return nil, newError(text, KindInvalid, err, "bad dependency in the metadata of %s", by)
		}
		base := req.Marker == nil || req.Marker.Evaluate(s.envWith(""))
		use := base
		if extra != "" {
			use = !base && req.Marker.Evaluate(s.envWith(extra))
		}
		if use {
			ws = append(ws, work{req: req, by: by})
		}
	}
	return ws, nil
}

// metadata returns the core metadata of name v: of the lock's wheel for a
// built-in at its lock version, else of the index's best file.
func (s *resolution) metadata(ctx context.Context, name, v string) (*Metadata, error) {
	key := name + " " + v
	if md, ok := s.meta[key]; ok {
		return md, nil
	}
	var md *Metadata
	var err error
	if lp, ok := s.r.lockBuild(name, v); ok {
		f := s.lockFile(name, lp)
		if _, ok := parseWheelName(f.Filename); !ok {
			md = &Metadata{Name: name, Version: v}
		} else {
			md, err = s.wheelMetadata(ctx, f, s.by[name])
		}
	} else {
		c := s.candidate(name, v)
		if c == nil || len(c.usable) == 0 {
			return nil, fmt.Errorf("%w: %s %s is not a listed version", errInternal, name, v)
		}
		md, err = s.indexMetadata(ctx, name, v, c.usable[0], s.by[name])
	}
	if err != nil {
		return nil, err
	}
	s.meta[key] = md
	return md, nil
}

// errInternal is a broken invariant of the resolver: a bug here.
var errInternal = errors.New("resolver: internal error")
