package config

// The command line of upstream's PyPI release, mcp-run-python 0.0.22
// (`uvx mcp-run-python`), which Python's argparse parses:
//
//	mcp-run-python [-h] [--port PORT] [--deps DEPS] [--disable-networking]
//	               [--verbose] [--version] [{stdio,streamable-http,streamable-http-stateless,example}]
//
// Its flags and modes are ours, with the same meaning, but for --verbose
// (parseLogLevel) and the other names argparse gives its flags
// (pypiFlagNames), so that its users' invocations work unchanged.

import (
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
)

// pypiFlagNames returns the pflag normalization that maps the other names
// of the release's flags to ours: --dependencies, its alias of --deps, and
// the prefixes argparse takes for a long option when only one option string
// starts with them (allow_abbrev, its default), such as --verb for
// --verbose or --po for --port. A prefix of two option strings, such as
// --dep (--deps and --dependencies) or --ver, is an error there and stays
// an unknown flag here.
func pypiFlagNames() func(*pflag.FlagSet, string) pflag.NormalizedName {
	release := []struct{ name, ours string }{
		{"port", "port"},
		{"deps", "deps"},
		{"dependencies", "deps"},
		{"disable-networking", "disable-networking"},
		{"verbose", "verbose"},
		{"version", "version"},
		{"help", "help"},
	}
	names := map[string]string{}
	for _, o := range release {
		names[o.name] = o.ours
		for n := 1; n < len(o.name); n++ {
			prefix, matches := o.name[:n], 0
			for _, other := range release {
				if strings.HasPrefix(other.name, prefix) {
					matches++
				}
			}
			if matches == 1 {
				names[prefix] = o.ours
			}
		}
	}
	return func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if ours, ok := names[name]; ok {
			return pflag.NormalizedName(ours)
		}
		return pflag.NormalizedName(name)
	}
}

// parseLogLevel returns the level of the server's own log: --log-level, or
// debug with --verbose. Given in the same place, the command line or the
// environment, the two exclude each other; otherwise the command line wins.
// With neither, --tool-schema pypi makes the default info, the release's
// level without --verbose; the default stays warn for everyone else.
func parseLogLevel(v flagValues, src flagSources) (zapcore.Level, error) {
	levelSet := src.fs.Changed("log-level")
	_, levelFromEnv := src.fromEnv["log-level"]
	_, verboseFromEnv := src.fromEnv["verbose"]
	switch {
	case v.verbose && levelSet && levelFromEnv == verboseFromEnv:
		return 0, usageErrorf("%s and %s exclude each other", src.name("verbose"), src.name("log-level"))
	case v.verbose && (!levelSet || levelFromEnv):
		return zapcore.DebugLevel, nil
	case !levelSet && v.toolSchema == SchemaPyPI:
		return zapcore.InfoLevel, nil
	}
	return v.logLevel, nil
}
