package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/js"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// planTTL is how long a resolved set of requirements is reused. Within it,
// calls with the same requirements ask no index at all; after it, newer
// releases are seen.
const planTTL = 10 * time.Minute

// installer resolves, fetches and installs the packages of calls. It works
// on the trusted side: the index, the package host and the cache are its
// alone, and workers get the files' bytes over the bridge, so user code needs
// neither network nor file access for its dependencies.
type installer struct {
	resolver *packages.Resolver
	cache    *packages.Cache
	imports  map[string]string // import name → package name, from Pyodide's lock file
	deps     []string          // --deps, for every call
	log      *zap.Logger

	// plans are resolved sets of requirements, by the requirements: a
	// repeated call asks no index for planTTL. Bounded, so that calls with
	// ever new requirements cannot grow it without end.
	plans *expirable.LRU[string, resolved]
}

type resolved struct {
	plan packages.Plan
	at   time.Time
}

// maxPlans bounds the resolved sets kept: far more than the distinct sets
// of dependencies a server's calls use within planTTL.
const maxPlans = 1024

// newInstaller reads the lock file of the installed Pyodide and sets up the
// resolver and the package cache under the cache directory.
func newInstaller(cfg Config, pyodideDir string, log *zap.Logger) (*installer, error) {
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
	return &installer{
		resolver: resolver,
		cache:    cache,
		imports:  lock.ImportTable(),
		deps:     cfg.Deps,
		log:      log,
		plans:    expirable.NewLRU[string, resolved](maxPlans, nil, planTTL),
	}, nil
}

// files resolves reqs (after --deps) and returns the files to install, read
// from the cache, skipping those already installed. A failure is a
// *packages.Error naming the requirement. Progress goes to the server's log
// and, as Progress lines, to out if it is not nil.
func (in *installer) files(ctx context.Context, reqs []string, installed map[string]bool, out func(Line)) ([]bridge.Wheel, error) {
	all := append(slices.Clone(in.deps), reqs...)
	if len(all) == 0 {
		return nil, nil
	}
	progress := func(msg string) {
		in.log.Debug(msg)
		if out != nil {
			out(Line{Stream: Progress, Text: msg})
		}
	}
	plan, err := in.plan(ctx, all, progress)
	if err != nil {
		return nil, err
	}
	var todo packages.Plan
	for _, f := range plan.Files {
		if !installed[f.Filename] {
			todo.Files = append(todo.Files, f)
		}
	}
	local, err := in.cache.WithProgress(progress).Fetch(ctx, todo)
	if err != nil {
		return nil, err
	}
	wheels := make([]bridge.Wheel, len(local))
	for i, f := range local {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, fmt.Errorf("read %s from the package cache: %w", f.Filename, err)
		}
		wheels[i] = bridge.Wheel{File: bridge.File{Name: f.Filename, InstallDir: f.InstallDir}, Data: data}
		installed[f.Filename] = true
	}
	return wheels, nil
}

// plan resolves reqs, reusing a plan made for the same requirements within
// planTTL.
func (in *installer) plan(ctx context.Context, reqs []string, progress func(string)) (packages.Plan, error) {
	key := strings.Join(reqs, "\n")
	if r, ok := in.plans.Get(key); ok {
		progress("resolved " + strings.Join(reqs, ", ") + " (as resolved " + time.Since(r.at).Round(time.Second).String() + " ago)")
		return r.plan, nil
	}
	plan, err := in.resolver.WithProgress(progress).Resolve(ctx, reqs)
	if err != nil {
		return packages.Plan{}, err
	}
	in.plans.Add(key, resolved{plan, time.Now()})
	return plan, nil
}

// inferred maps the modules code imports that the worker cannot import to
// the packages to install. Ask after installing --deps: what they bring is
// then importable and not inferred again.
func (in *installer) inferred(ctx context.Context, w *worker, code string) ([]string, error) {
	// Without the word there is no import statement to find: skip the round trip.
	if !strings.Contains(code, "import") {
		return nil, nil
	}
	names, err := w.conn.Imports(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("find the code's imports: %w", err)
	}
	return packages.FromImports(names, nil, in.imports), nil
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
