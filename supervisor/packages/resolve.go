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
	// the resolver uses nothing but the cache, local directories and Lock.
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
// anew for each).
//
// It is a greedy resolver without backtracking: every requirement a
// package names is registered before any of those packages is chosen, each
// package is chosen once (the newest version allowed by every constraint
// known at that point), and any later constraint is checked against that
// choice, which gives a KindConflict error rather than a search for
// another combination. For the small, mostly pure-Python dependency sets
// of scripts this picks what pip would; where pip would backtrack, the
// error names both sides.
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
}

// NewResolver checks cfg and returns a Resolver.
func NewResolver(cfg Config) (*Resolver, error) {
	r := &Resolver{lock: cfg.Lock, cache: cfg.Cache, client: cfg.HTTPClient, progress: cfg.Progress}
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

// Resolve resolves PEP 508 requirement strings (requirements whose marker
// is false in Pyodide are dropped) into a plan of files to install, each
// after its dependencies. Failures are [*Error]s naming the requirement
// and why, e.g. KindNotFound, KindNoCompatibleWheel, KindConflict,
// KindUnreachable, KindOfflineMiss, KindInvalid.
func (r *Resolver) Resolve(ctx context.Context, reqs []string) (Plan, error) {
	start := time.Now()
	s := &resolution{
		r:           r,
		nodes:       map[string]*node{},
		constraints: map[string][]constraint{},
		projects:    map[string]*Project{},
	}
	plan := Plan{Requirements: slices.Clone(reqs)}
	if len(reqs) == 0 {
		return plan, nil
	}
	s.say("resolving %s", strings.Join(reqs, ", "))
	var top []work
	for _, text := range reqs {
		req, err := ParseRequirement(text)
		if err != nil {
			return Plan{}, newError(text, KindInvalid, nil, "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("invalid requirement %q: ", text)))
		}
		if req.Marker != nil && !req.Marker.Evaluate(s.envWith("")) {
			s.say("%s: skipped, its marker is false in Pyodide", text)
			continue
		}
		top = append(top, work{req: req})
	}
	s.enqueue(top)
	for len(s.queue) > 0 {
		if err := ctx.Err(); err != nil {
			return Plan{}, err
		}
		w := s.queue[0]
		s.queue = s.queue[1:]
		if err := s.process(ctx, w); err != nil {
			return Plan{}, err
		}
	}
	plan.Files = s.ordered()
	s.say("resolved %d package(s) in %s", len(plan.Files), time.Since(start).Round(time.Millisecond))
	return plan, nil
}

// work is a requirement waiting to be processed; by describes who asked
// ("" for the caller, else "name version").
type work struct {
	req Requirement
	by  string
}

// constraint is one requirement on a package, kept to check choices.
type constraint struct {
	spec Specifier
	text string
	by   string
}

func (c constraint) describe() string {
	if c.by == "" {
		return fmt.Sprintf("%q", c.text)
	}
	return fmt.Sprintf("%q (required by %s)", c.text, c.by)
}

// node is a chosen package.
type node struct {
	name    string // normalized
	version string
	file    PlanFile
	meta    *Metadata // nil until needed for lock packages
	extras  []string  // extras whose dependencies were added
	deps    []string  // normalized names, in the order found
	lock    bool
}

type resolution struct {
	r           *Resolver
	nodes       map[string]*node
	order       []string // names in the order chosen
	constraints map[string][]constraint
	projects    map[string]*Project
	queue       []work
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

// enqueue registers the constraints of a batch of requirements before any
// of them is processed, so each choice sees all its siblings' constraints.
func (s *resolution) enqueue(ws []work) {
	for _, w := range ws {
		name := Normalize(w.req.Name)
		s.constraints[name] = append(s.constraints[name], constraint{spec: w.req.Specifier, text: w.req.Text, by: w.by})
	}
	s.queue = append(s.queue, ws...)
}

func (s *resolution) process(ctx context.Context, w work) error {
	req := w.req
	name := Normalize(req.Name)
	if req.URL != "" {
		return newError(req.Text, KindInvalid, nil, "direct URL references are not supported; name a package from the index")
	}
	n := s.nodes[name]
	if n == nil {
		var err error
		if n, err = s.choose(ctx, name, w); err != nil {
			return err
		}
		s.nodes[name] = n
		s.order = append(s.order, name)
		if n.lock {
			var deps []work
			for _, d := range s.r.lock.Packages[name].Depends {
				deps = append(deps, work{req: Requirement{Name: d, Text: d}, by: name + " " + n.version})
			}
			s.addDeps(n, deps)
		} else if err := s.addMetadataDeps(n, nil); err != nil {
			return err
		}
	} else if !req.Specifier.Allows(n.version) {
		if n.lock {
			return newError(req.Text, KindConflict, nil, "%s", lockConflict(w.by, name, n.version))
		}
		first := s.constraints[name][0]
		return newError(req.Text, KindConflict, nil, "%s%s %s was already chosen for %s",
			requiredBy(w.by), name, n.version, first.describe())
	}
	// Extras asked for now that were not handled yet.
	var newExtras []string
	for _, e := range req.Extras {
		if !slices.Contains(n.extras, e) {
			newExtras = append(newExtras, e)
		}
	}
	if len(newExtras) == 0 {
		return nil
	}
	if n.meta == nil {
		md, err := s.lockMetadata(ctx, n, req.Text)
		if err != nil {
			return err
		}
		n.meta = md
	}
	return s.addMetadataDeps(n, newExtras)
}

// requiredBy starts a reason with who needs the requirement, if anyone.
func requiredBy(by string) string {
	if by == "" {
		return ""
	}
	return "required by " + by + ", but "
}

// lockConflict explains Pyodide's one-version rule.
func lockConflict(by, name, version string) string {
	return fmt.Sprintf("%sPyodide ships %s %s and cannot install another version of it", requiredBy(by), name, version)
}

// addDeps records a node's dependencies and queues them.
func (s *resolution) addDeps(n *node, ws []work) {
	for _, w := range ws {
		d := Normalize(w.req.Name)
		if d != n.name && !slices.Contains(n.deps, d) {
			n.deps = append(n.deps, d)
		}
	}
	s.enqueue(ws)
}

// addMetadataDeps queues the Requires-Dist entries of n's metadata that
// apply: with extras nil, those whose marker holds without an extra; with
// extras, those that hold only for one of these extras.
func (s *resolution) addMetadataDeps(n *node, extras []string) error {
	by := n.name + " " + n.version
	var ws []work
	for _, text := range n.meta.RequiresDist {
		req, err := ParseRequirement(text)
		if err != nil {
			return newError(text, KindInvalid, err, "bad dependency in the metadata of %s", by)
		}
		base := req.Marker == nil || req.Marker.Evaluate(s.envWith(""))
		use := false
		if extras == nil {
			use = base
		} else if !base {
			for _, e := range extras {
				if req.Marker.Evaluate(s.envWith(e)) {
					use = true
					break
				}
			}
		}
		if use {
			ws = append(ws, work{req: req, by: by})
		}
	}
	n.extras = append(n.extras, extras...)
	s.addDeps(n, ws)
	return nil
}

// choose picks the version and file of a package not chosen yet.
func (s *resolution) choose(ctx context.Context, name string, w work) (*node, error) {
	cons := s.constraints[name]
	if lp, ok := s.r.lockPackage(name); ok {
		for _, c := range cons {
			if !c.spec.Allows(lp.Version) {
				return nil, newError(c.text, KindConflict, nil, "%s", lockConflict(c.by, name, lp.Version))
			}
		}
		src := s.r.pyodide.ResolveReference(&url.URL{Path: url.PathEscape(lp.FileName)})
		s.say("%s %s: built into Pyodide", name, lp.Version)
		return &node{
			name: name, version: lp.Version, lock: true,
			file: PlanFile{
				Name: name, Version: lp.Version, Filename: lp.FileName, Source: sourceString(src),
				SHA256: lp.SHA256, Origin: OriginLock, PackageType: lp.PackageType, InstallDir: lp.InstallDir,
			},
		}, nil
	}
	if s.r.index == nil {
		return nil, newError(w.req.Text, KindNotFound, nil, "%s is not a Pyodide package and no package index is configured", name)
	}
	proj, err := s.project(ctx, name, w)
	if err != nil {
		return nil, err
	}
	return s.chooseFromIndex(ctx, name, proj, w)
}

func (r *Resolver) lockPackage(name string) (*LockPackage, bool) {
	if r.lock == nil {
		return nil, false
	}
	return r.lock.Package(name)
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
			return nil, newError(w.req.Text, KindOfflineMiss, nil,
				"offline mode, and the package cache has no index page for %s (from %s)", name, ix)
		}
	} else {
		p, err = ix.Project(ctx, name)
		if err == nil && ix.remote() && s.r.cache != nil {
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
			return nil, newError(w.req.Text, KindUnreachable, err, "cannot look up %s", name)
		}
		return nil, newError(w.req.Text, KindUnreachable, err, "cannot read the index page of %s", name)
	}
	s.projects[name] = p
	return p, nil
}

func byText(w work) string {
	if w.by == "" {
		return ""
	}
	return " (required by " + w.by + ")"
}

// candidate is one version on the index with its usable wheels.
type candidate struct {
	version  pep440.Version
	text     string
	usable   []IndexFile // compatible wheels, best first
	rejected []string    // why other files of this version are not usable
}

func (s *resolution) chooseFromIndex(ctx context.Context, name string, proj *Project, w work) (*node, error) {
	cons := s.constraints[name]
	pinned := false
	for _, c := range cons {
		pinned = pinned || c.spec.pinned()
	}
	cands := s.candidates(name, proj, pinned)
	if len(cands) == 0 {
		return nil, newError(w.req.Text, KindNotFound, nil, "the index %s lists no files for %s%s", s.r.index, name, byText(w))
	}
	// Versions allowed by every constraint, pre-releases per PEP 440.
	allowPre := false
	for _, c := range cons {
		allowPre = allowPre || c.spec.Prereleases()
	}
	var finals, pres []*candidate
	for _, c := range cands {
		ok := true
		for _, con := range cons {
			ok = ok && con.spec.allows(c.version, c.text)
		}
		if !ok {
			continue
		}
		if c.version.IsPreRelease() {
			pres = append(pres, c)
		} else {
			finals = append(finals, c)
		}
	}
	matching := finals
	if allowPre {
		matching = append(finals, pres...)
	} else if len(finals) == 0 {
		matching = pres // only pre-releases match: PEP 440 allows them then
	}
	sort.SliceStable(matching, func(i, j int) bool { return matching[i].version.GreaterThan(matching[j].version) })
	if len(matching) == 0 {
		return nil, newError(w.req.Text, KindNotFound, nil, "no version of %s matches %s (available: %s)",
			name, describeConstraints(cons), availableVersions(cands))
	}
	var tried []string
	for _, c := range matching {
		for _, f := range c.usable {
			md, err := s.indexMetadata(ctx, name, c.text, f, w)
			if err != nil {
				return nil, err
			}
			if md.RequiresPython != "" {
				if rp, err := ParseSpecifier(md.RequiresPython); err == nil && !rp.Allows(s.r.env["python_full_version"]) {
					tried = append(tried, fmt.Sprintf("%s requires Python %s", f.Filename, md.RequiresPython))
					continue
				}
			}
			s.say("%s %s: from the index (%s)", name, c.text, f.Filename)
			return &node{
				name: name, version: c.text, meta: md,
				file: PlanFile{
					Name: name, Version: c.text, Filename: f.Filename, Source: f.URL, SHA256: f.SHA256,
					Size: f.Size, Origin: OriginIndex, PackageType: TypePackage, InstallDir: "site",
				},
			}, nil
		}
		tried = append(tried, c.rejected...)
	}
	hint := ""
	for _, why := range tried {
		if strings.HasSuffix(why, whyPlatform) || strings.HasSuffix(why, whySdist) {
			hint = fmt.Sprintf("; Pyodide needs pure-Python wheels (py3-none-any) or wheels built for %s", s.platformText())
			break
		}
	}
	return nil, newError(w.req.Text, KindNoCompatibleWheel, nil,
		"no file of %s %s can be installed in Pyodide (%s)%s",
		name, describeMatching(matching), summarize(tried, 6), hint)
}

// Reasons a file is not usable that call for a hint on what Pyodide needs.
const (
	whySdist    = "a source distribution, not a wheel"
	whyPlatform = "built for another platform"
)

// candidates groups a project's files by version and sorts out which
// wheels are usable.
func (s *resolution) candidates(name string, proj *Project, pinned bool) []*candidate {
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
		case f.Yanked && !pinned:
			reject("yanked")
			continue
		case !sha256RE.MatchString(f.SHA256):
			reject("the index gives no sha256 for it")
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
	offline := s.r.cache != nil && s.r.cache.Offline()
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

// lockMetadata reads the METADATA of a lock package's wheel, needed when
// extras of a built-in package are asked for.
func (s *resolution) lockMetadata(ctx context.Context, n *node, req string) (*Metadata, error) {
	if _, ok := parseWheelName(n.file.Filename); !ok {
		return &Metadata{Name: n.name, Version: n.version}, nil
	}
	return s.wheelMetadata(ctx, n.file, work{req: Requirement{Text: req}})
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
		return newError(w.req.Text, KindUnreachable, err, "cannot read the metadata of %s %s", name, version)
	case errors.Is(err, errNotFound):
		return newError(w.req.Text, KindNotFound, err, "%s is listed but missing", filename)
	}
	return newError(w.req.Text, KindNoCompatibleWheel, err, "cannot read the metadata of %s %s", name, version)
}

// ordered lists the chosen packages' files, dependencies first (a cycle
// is broken where it was entered), otherwise in the order chosen.
func (s *resolution) ordered() []PlanFile {
	var out []PlanFile
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string)
	visit = func(name string) {
		if state[name] != 0 {
			return
		}
		state[name] = 1
		n := s.nodes[name]
		for _, d := range n.deps {
			if _, ok := s.nodes[d]; ok {
				visit(d)
			}
		}
		state[name] = 2
		f := n.file
		f.Depends = slices.Clone(n.deps)
		out = append(out, f)
	}
	for _, name := range s.order {
		visit(name)
	}
	return out
}

func (s *resolution) platformText() string {
	if len(s.r.platforms) == 0 {
		return "Pyodide"
	}
	return s.r.platforms[0]
}

func describeConstraints(cons []constraint) string {
	var parts []string
	for _, c := range cons {
		spec := c.spec.String()
		if spec == "" {
			continue
		}
		if c.by != "" {
			spec += " (required by " + c.by + ")"
		}
		if !slices.Contains(parts, spec) {
			parts = append(parts, spec)
		}
	}
	if len(parts) == 0 {
		return "any version"
	}
	return strings.Join(parts, " and ")
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
