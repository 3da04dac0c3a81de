package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/config"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir"
)

// cacheCommand is the cache mode: it lists the entries of the cache
// directory (kind, size, last use, whether a server holds them) with the
// totals, or with --prune removes the least recently used beyond
// --cache-limit, as servers do (see package cachedir), keeping this build's
// worker program and Pyodide install. It needs no deno and starts nothing.
func cacheCommand(ctx context.Context, cfg config.Config, std streams) int {
	d, err := cachedir.Open(cfg.Supervisor.CacheDir)
	if err == nil && cfg.Prune {
		err = pruneCacheDir(ctx, d, cfg.Supervisor.CacheLimit, std)
	} else if err == nil {
		err = listCacheDir(ctx, d, cfg.Supervisor.CacheLimit, std.out)
	}
	if err != nil {
		fmt.Fprintf(std.err, "mcp-run-python: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// listCacheDir writes the entries of d, least recently used first, and the
// totals to w.
func listCacheDir(ctx context.Context, d cachedir.Dir, limit int64, w io.Writer) error {
	l, err := d.List(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "cache directory %s, least recently used first\n\n", d.Root())
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tSIZE\tLAST USED\tIN USE\tENTRY")
	for _, e := range l.Entries {
		inUse := "no"
		if e.InUse {
			inUse = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Kind, size(e.Size), lastUsed(e.LastUsed, now), inUse, members(d, e))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d entries, %s; %s of them in use; --cache-limit %s\n", len(l.Entries), size(l.Total), size(l.InUse), limitText(limit))
	if len(l.Others) > 0 {
		others := make([]string, len(l.Others))
		for i, a := range l.Others {
			others[i] = a.Name + " " + size(a.Size)
		}
		fmt.Fprintf(w, "not counted, never pruned: %s\n", strings.Join(others, ", "))
	}
	return nil
}

// pruneCacheDir removes the least recently used entries of d beyond limit
// and says what it removed and what it spared.
func pruneCacheDir(ctx context.Context, d cachedir.Dir, limit int64, std streams) error {
	res, err := d.Prune(ctx, limit, cachedir.PruneOptions{
		KeepRecent: cachedir.DefaultKeepRecent,
		Keep:       supervisor.CurrentCacheEntries(d.Root()),
		OnWait: func() {
			fmt.Fprintln(std.err, "waiting for a server that is preparing its runtime in this cache directory...")
		},
	})
	if err != nil {
		return err
	}
	w := std.out
	fmt.Fprintf(w, "cache directory %s, --cache-limit %s\n", d.Root(), limitText(limit))
	if limit <= 0 {
		fmt.Fprintf(w, "no limit: nothing removed; the entries take %s\n", size(res.Total))
		return nil
	}
	now := time.Now()
	for _, e := range res.Removed {
		fmt.Fprintf(w, "removed %s %s, %s (last used %s)\n", e.Kind, members(d, e), size(e.Size), lastUsed(e.LastUsed, now))
	}
	fmt.Fprintf(w, "removed %d entries, %s; the entries take %s\n", len(res.Removed), size(res.Freed()), size(res.Total))
	if res.Total <= limit {
		return nil
	}
	counts := map[cachedir.Reason]int{}
	for _, s := range res.Spared {
		counts[s.Reason]++
		if s.Err != nil {
			fmt.Fprintf(w, "cannot remove %s: %v\n", s.Name, s.Err)
		}
	}
	var why []string
	for _, r := range []cachedir.Reason{cachedir.InUse, cachedir.Recent, cachedir.Kept, cachedir.Unremovable} {
		if n := counts[r]; n > 0 {
			text := fmt.Sprintf("%d %s", n, r)
			switch r {
			case cachedir.Recent:
				text += " (in the last " + cachedir.DefaultKeepRecent.String() + ")"
			case cachedir.Kept:
				text += " (this version's worker program and Pyodide)"
			}
			why = append(why, text)
		}
	}
	fmt.Fprintf(w, "still above the limit: the entries left are %s\n", strings.Join(why, ", "))
	return nil
}

// members names e's members relative to d, such as
// "snapshots/<key>.bin + codecache/<key>", or its name when none is left.
func members(d cachedir.Dir, e cachedir.Entry) string {
	if len(e.Members) == 0 {
		return e.Name
	}
	names := make([]string, len(e.Members))
	for i, m := range e.Members {
		rel, err := filepath.Rel(d.Root(), m)
		if err != nil {
			rel = m
		}
		names[i] = filepath.ToSlash(rel)
	}
	return strings.Join(names, " + ")
}

// size writes n bytes as the flags take sizes, in powers of 1024.
func size(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// limitText writes a --cache-limit.
func limitText(limit int64) string {
	if limit <= 0 {
		return "0 (no limit)"
	}
	return size(limit)
}

// lastUsed writes a time of last use, and how long ago it was.
func lastUsed(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Local().Format("2006-01-02 15:04") + " (" + humanize.RelTime(t, now, "ago", "from now") + ")"
}
