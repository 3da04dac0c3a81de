package main

// Package config, a leaf, parses the command line into values of its own
// types. Here they become the configurations of the program's packages: the
// supervisor's, the transport's and the MCP server's. The values whose rules
// are those packages' own are checked on the way (config.Config.Check), with
// the messages of any wrong flag value: requirements, package locations,
// hosts, origins and mounts.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/llmendpoint"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/transport"
	"github.com/mcp-run-python/mcp-run-python/permissions"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
	"github.com/mcp-run-python/mcp-run-python/supervisor/packages"
)

// wired is what the command line decides of the program's packages.
type wired struct {
	supervisor supervisor.Config // with its defaults filled in
	limits     transport.Limits
	returnMode render.ReturnMode
	toolSchema mcpserver.ToolSchema
}

// configure parses args (without the program name) as config.Parse does,
// and turns the configuration into the program's. Wrong arguments give a
// *config.UsageError.
func configure(args []string, env config.Environment) (config.Config, wired, error) {
	cfg, err := config.Parse(args, env)
	if err != nil || cfg.Help || cfg.Version {
		return cfg, wired{}, err
	}
	w, err := wire(cfg)
	return cfg, w, err
}

// wire turns cfg into the program's configurations, checking the values
// whose rules are the program packages' in the order of the flags.
func wire(cfg config.Config) (wired, error) {
	var hosts, origins []string
	var mounts []mount.Mount
	checks := []struct {
		flag  string
		check func(string) error
	}{
		{"deps", func(s string) error {
			for _, dep := range config.SplitList(s) {
				if _, err := packages.ParseRequirement(strings.TrimSpace(dep)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"index-url", packages.CheckLocation},
		{"pyodide-index-url", func(s string) error {
			if s == "" {
				return nil // the pinned release's host
			}
			return packages.CheckLocation(s)
		}},
		{"allow-net", func(s string) (err error) {
			hosts, err = allowNet(s)
			return err
		}},
		{"mount", func(s string) (err error) {
			mounts, err = addMounts(mounts, s)
			return err
		}},
		{"allow-origin", func(s string) (err error) {
			origins, err = allowOrigins(s)
			return err
		}},
	}
	for _, c := range checks {
		if err := cfg.Check(c.flag, c.check); err != nil {
			return wired{}, err
		}
	}
	for _, r := range cfg.Fetch {
		if _, err := packages.ParseRequirement(r); err != nil {
			return wired{}, &config.UsageError{Err: fmt.Errorf("fetch: %w", err)}
		}
	}

	s := cfg.Supervisor
	l := cfg.Limits
	return wired{
		supervisor: supervisor.Config{
			Deno:                 s.Deno,
			CacheDir:             s.CacheDir,
			Workers:              s.Workers,
			Timeout:              s.Timeout,
			OutputLimit:          s.OutputLimit,
			MemoryLimit:          s.MemoryLimit,
			Deps:                 s.Deps,
			IndexURL:             s.IndexURL,
			PyodideIndexURL:      s.PyodideIndexURL,
			Offline:              s.Offline,
			Networking:           s.Networking,
			AllowNet:             hosts,
			PrivateNetworks:      s.PrivateNetworks,
			Warm:                 s.Warm,
			Queue:                s.Queue,
			QueueTimeout:         s.QueueTimeout,
			MaxCallsPerPrincipal: s.MaxCallsPerPrincipal,
			CodeLimit:            s.CodeLimit,
			Grace:                s.Grace,
			SessionIdleCPU:       s.SessionIdleCPU,
			Files:                s.Files,
			FilesLimit:           s.FilesLimit,
			Mounts:               mounts,
			MountLimits:          mount.Limits{MaxBytes: s.MountBytes, MaxFiles: s.MountFiles},
			ToolCalls:            s.ToolCalls,
			CacheLimit:           s.CacheLimit,
			AskLimits: supervisor.AskLimits{
				Requests: cfg.Ask.Requests, Batch: cfg.Ask.Batch,
				PromptBytes: cfg.Ask.PromptBytes, AnswerBytes: cfg.Ask.AnswerBytes,
				MaxTokens: cfg.Ask.MaxTokens, Wait: cfg.Ask.Wait,
			},
		}.WithDefaults(),
		limits: transport.Limits{
			RequestLimit:               l.RequestLimit,
			ReadTimeout:                l.ReadTimeout,
			MaxConnections:             l.MaxConnections,
			MaxMCPSessions:             l.MaxMCPSessions,
			MaxMCPSessionsPerPrincipal: l.MaxMCPSessionsPerPrincipal,
			MCPSessionIdle:             l.MCPSessionIdle,
			AllowOrigins:               origins,
		},
		returnMode: render.ReturnMode(cfg.ReturnMode),
		toolSchema: mcpserver.ToolSchema(cfg.ToolSchema),
	}, nil
}

// taskOptions returns the options of tasks (--tasks), nil without. A task's
// run is bounded by the longest a call can take, with room for a call of a
// Python session that waits for the one before it.
func taskOptions(cfg config.Config, sup supervisor.Config) *mcpserver.TaskOptions {
	if !cfg.Tasks {
		return nil
	}
	var maxRun time.Duration // 0: mcpserver's default, when calls may wait for ever
	if sup.QueueTimeout > 0 {
		maxRun = sup.QueueTimeout + 2*sup.Timeout + sup.CancelWait() + time.Minute
	}
	return &mcpserver.TaskOptions{
		PerOwner: cfg.TasksPerPrincipal, Retention: cfg.TaskRetention, MaxRun: maxRun,
		ResultsLimit: cfg.TaskResultsLimit, MaxResults: cfg.MaxTaskResults,
	}
}

// askOptions returns what code may ask and who answers when the client
// cannot (--sampling, --elicitation, --llm-url), nil without either flag.
// It reads the endpoint's key from --llm-key-file.
func askOptions(a config.Ask) (*mcpserver.AskOptions, error) {
	if !a.Sampling && !a.Elicitation {
		return nil, nil
	}
	o := &mcpserver.AskOptions{
		Model: a.Sampling, Person: a.Elicitation, Concurrency: a.Concurrency, MaxTokens: a.MaxTokens,
		ParkTimeout: a.ParkTimeout, ParkedPerPrincipal: a.ParkedPerPrincipal,
	}
	if a.LLMURL == "" {
		return o, nil
	}
	key := a.LLMKey
	if a.LLMKeyFile != "" {
		data, err := os.ReadFile(a.LLMKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--llm-key-file: %w", err)
		}
		key = strings.TrimSpace(string(data))
	}
	var bodyLimit int64 // an answer escaped as JSON, and the rest of the response
	if a.AnswerBytes > 0 {
		bodyLimit = 6*int64(a.AnswerBytes) + 64<<10
	}
	o.Endpoint = &llmendpoint.Client{
		URL: a.LLMURL, Model: a.LLMModel, Key: key, Concurrency: a.Concurrency, BodyLimit: bodyLimit,
		HTTP: &http.Client{Timeout: a.Wait},
	}
	return o, nil
}

// allowNet returns the hosts of an --allow-net value, dropping repeats; nil
// for "", the flag not set.
func allowNet(s string) ([]string, error) {
	var hosts []string
	for _, entry := range config.SplitList(s) {
		host, err := permissions.ParseHost(entry)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	return hosts, nil
}

// allowOrigins returns the entries of an --allow-origin value as browsers
// send them (see transport.NormalizeOrigin), or "*".
func allowOrigins(s string) ([]string, error) {
	var origins []string
	for _, entry := range config.SplitList(s) {
		entry = strings.TrimSpace(entry)
		if entry != "*" {
			origin, ok := transport.NormalizeOrigin(entry)
			if !ok {
				return nil, fmt.Errorf("%q is not an origin such as https://app.example.com or http://localhost:5173", entry)
			}
			entry = origin
		}
		origins = append(origins, entry)
	}
	return origins, nil
}

// addMounts returns mounts and those of an --mount value, one a line, each
// parsed and its host folder resolved (see mount.Resolve) so that a mistake
// shows at start; mounts when they would overlap.
func addMounts(mounts []mount.Mount, s string) ([]mount.Mount, error) {
	added := slices.Clone(mounts)
	for _, line := range config.SplitLines(s) {
		m, err := mount.Parse(line)
		if err == nil {
			m, err = m.Resolve()
		}
		if err != nil {
			// The message starts with "--mount", which ours says already,
			// or names the environment variable instead.
			return mounts, errors.New(strings.TrimPrefix(err.Error(), "--mount "))
		}
		added = append(added, m)
	}
	if err := mount.CheckOverlap(added); err != nil {
		return mounts, err
	}
	return added, nil
}
