package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// warmupCheckCode is the script warmup runs to check the whole path.
const warmupCheckCode = `import sys
print(f'Python {sys.version.split()[0]} is ready')
1 + 1
`

// exampleCode is the demo script of the example mode; it needs nothing but
// the standard library.
const exampleCode = `import json
import statistics

temperatures = [21.5, 23.0, 19.8, 25.1, 22.4]
print(f'mean temperature: {statistics.mean(temperatures):.2f}')
json.loads(json.dumps({
    'median': statistics.median(temperatures),
    'stdev': round(statistics.stdev(temperatures), 3),
    'warmest': max(temperatures),
}))
`

// warmup prepares the runtime, runs a check script and reports on stderr.
func warmup(ctx context.Context, eng engine, stderr io.Writer, version string) int {
	fmt.Fprintf(stderr, "Warming up MCP Run Python version %s...\n", version)
	if err := eng.Warmup(ctx, func(step string) { fmt.Fprintln(stderr, step) }); err != nil {
		fmt.Fprintf(stderr, "warmup failed: %v\n", err)
		return exitFailure
	}
	res, err := eng.Run(ctx, supervisor.Request{Code: warmupCheckCode})
	if err != nil {
		fmt.Fprintf(stderr, "warmup check failed: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stderr, "Check result:\n%s\n", render.XML(res))
	if res.Status != supervisor.StatusSuccess {
		fmt.Fprintln(stderr, "warmup check failed")
		return exitFailure
	}
	fmt.Fprintln(stderr, "warmup successful")
	return exitOK
}

// example runs the demo script through the whole path: printed lines go to
// stderr as they come, the rendered result to stdout.
func example(ctx context.Context, eng engine, std streams, version string) int {
	fmt.Fprintf(std.err, "Running example script for MCP Run Python version %s...\n", version)
	if err := eng.Warmup(ctx, func(step string) { fmt.Fprintln(std.err, step) }); err != nil {
		fmt.Fprintf(std.err, "warmup failed: %v\n", err)
		return exitFailure
	}
	res, err := eng.Run(ctx, supervisor.Request{Code: exampleCode, OnLine: func(line supervisor.Line) {
		fmt.Fprintf(std.err, "%s: %s\n", mcpserver.LineLevel(line), line.Text)
	}})
	if err != nil {
		fmt.Fprintf(std.err, "example failed: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(std.out, "Tool return value:\n%s\n", render.XML(res))
	if res.Status != supervisor.StatusSuccess {
		return exitFailure
	}
	return exitOK
}
