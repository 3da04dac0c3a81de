package install

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/cachedir/cachedirtest"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/runtimefiles"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/tracker"
)

func TestInferenceClaims(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rounds     [][]string // the files each round asks for
		wantHidden [][]string // before each round
		fits       bool
	}{
		{"one_round", [][]string{{"a.whl", "b.whl"}}, [][]string{{"a", "a_ext", "b"}}, true},
		{"two_rounds", [][]string{{"a.whl"}, {"b.whl"}}, [][]string{{"a", "a_ext", "b"}, {"b"}}, true},
		{"more_than_the_set", [][]string{{"a.whl", "b.whl", "c.whl"}}, [][]string{{"a", "a_ext", "b"}}, false},
		{"less_than_the_set", [][]string{{"a.whl"}}, [][]string{{"a", "a_ext", "b"}}, false},
		{"the_same_file_twice", [][]string{{"a.whl"}, {"a.whl"}}, [][]string{{"a", "a_ext", "b"}, {"b"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inf := &Inference{unclaimed: map[string][]string{"a.whl": {"a", "a_ext"}, "b.whl": {"b"}}}
			fits := true
			for i, files := range tc.rounds {
				if got := inf.hidden(); !slices.Equal(got, tc.wantHidden[i]) {
					t.Errorf("round %d hides %q, want %q", i, got, tc.wantHidden[i])
				}
				var wheels []bridge.Payload
				for _, f := range files {
					wheels = append(wheels, bridge.Payload{File: bridge.File{Name: f}})
				}
				if !inf.claim(wheels) {
					fits = false
					break
				}
			}
			if fits && len(inf.unclaimed) > 0 {
				fits = false
			}
			if fits != tc.fits {
				t.Errorf("fits = %v, want %v", fits, tc.fits)
			}
		})
	}
}

func TestLearnedGuess(t *testing.T) {
	l := NewLearner(Background{})
	rt := &runtimefiles.Files{Key: "rt"}
	now := time.Now()
	for key, use := range map[string]time.Time{"req": now.Add(-time.Minute), "req+sym": now.Add(-time.Minute), "req-new": now, "np": now} {
		l.learned[key] = &learnedSet{lastUse: use}
	}
	l.guesses.Add("1", guess{key: "req", tops: []string{"requests"}})
	l.guesses.Add("2", guess{key: "req+sym", tops: []string{"requests", "sympy"}})
	l.guesses.Add("3", guess{key: "req-new", tops: []string{"requests"}})
	l.guesses.Add("4", guess{key: "np", tops: []string{"numpy"}})
	l.guesses.Add("5", guess{key: "gone", tops: []string{"pandas"}}) // no longer learned
	for _, tc := range []struct{ code, want string }{
		{"import requests\nrequests.get('x')", "req-new"},        // the one used last of two alike
		{"import json, requests\nimport sympy as sp", "req+sym"}, // the one with the most
		{"from numpy import array", "np"},
		{"import pandas", ""},
		{"import sympy", ""},
		{"1 + 1", ""},
	} {
		if got := l.Guess(rt, tc.code); got != tc.want {
			t.Errorf("learnedGuess(%q) = %q, want %q", tc.code, got, tc.want)
		}
	}
	if got := l.Guess(&runtimefiles.Files{}, "import requests"); got != "" {
		t.Errorf("learnedGuess without a runtime key = %q, want none", got)
	}
}

func TestLearnInferredRemembersTheFirstRound(t *testing.T) {
	l := NewLearner(Background{})
	l.making = true // no snapshot is made here
	rt := &runtimefiles.Files{Key: "rt"}
	wheels := []bridge.Payload{{File: bridge.File{Name: "requests.whl"}}, {File: bridge.File{Name: "urllib3.whl"}}}
	l.Inferred(rt, &Inference{first: []string{"requests.adapters", "requests"}, wheels: wheels})
	l.Inferred(rt, &Inference{first: []string{"nothing"}}) // nothing installed: nothing to learn
	key := setKey(rt, wheels)
	if n, _ := l.uses.Get(key); n != 1 {
		t.Errorf("the set was counted %d times, want 1", n)
	}
	gs := l.guesses.Values()
	if len(gs) != 1 || gs[0].key != key || !slices.Equal(gs[0].tops, []string{"requests"}) {
		t.Errorf("guesses = %+v, want one for %s with tops [requests]", gs, key)
	}
}

// TestLearnSetClosing: a snapshot of a learned set that the server's close
// stops (its client left, as clients do) is not a failure to report.
func TestLearnSetClosing(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg tracker.Tracker
	log := zap.New(core)
	maker := &runtimefiles.Maker{CacheDir: root, Log: log,
		Snapshot: func(context.Context, *runtimefiles.Files, string) ([]byte, error) {
			cancel() // the server closes while the snapshot is being made
			return nil, context.Canceled
		}}
	cache := runtimefiles.NewCache(ctx, &wg, log, root, 0, func() *runtimefiles.Files { return nil })
	l := NewLearner(Background{Ctx: ctx, WG: &wg, Log: log, Cache: cache, Maker: maker, StartTimeout: time.Minute})
	lib := filepath.Join(root, "packages", "wheels", "sha256", strings.Repeat("a", 64), "libfoo.so")
	cachedirtest.Write(t, lib, "")
	rt := &runtimefiles.Files{Key: "rt", Root: root, NoDenoDir: runtimefiles.Layout{Root: root}.NoDenoDir()}
	l.making = true
	l.learnSet(rt, "0123456789abcdef", []bridge.Payload{{File: bridge.File{Name: "libfoo.so"}, Path: lib}})
	for _, e := range logs.All() {
		t.Errorf("logged %s %q %v", e.Level, e.Message, e.ContextMap())
	}
}
