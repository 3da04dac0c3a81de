package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// fake is an interpreter that answers with what its test sets.
type fake struct {
	closed atomic.Bool
	run    func(ctx context.Context, req supervisor.Request) (supervisor.Result, error)
}

func (f *fake) Run(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
	if f.run != nil {
		return f.run(ctx, req)
	}
	return supervisor.Result{Status: supervisor.StatusSuccess}, nil
}

func (f *fake) Close() { f.closed.Store(true) }

// registry returns a registry whose interpreters are fakes, and the list
// of them and of ended ids, in order.
func registry(t *testing.T, cfg Config, run func(context.Context, supervisor.Request) (supervisor.Result, error)) (*Registry, func() []*fake, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var made []*fake
	var ended []string
	if cfg.Idle == 0 {
		cfg.Idle = time.Hour
	}
	if cfg.Max == 0 {
		cfg.Max = 4
	}
	cfg.OnEnd = func(id string) {
		mu.Lock()
		defer mu.Unlock()
		ended = append(ended, id)
	}
	r := New(cfg, func(context.Context) (Interpreter, error) {
		mu.Lock()
		defer mu.Unlock()
		f := &fake{run: run}
		made = append(made, f)
		return f, nil
	}, zap.NewNop())
	t.Cleanup(r.Shutdown)
	return r, func() []*fake {
			mu.Lock()
			defer mu.Unlock()
			return append([]*fake(nil), made...)
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), ended...)
		}
}

// create makes a session of owner in the MCP session of the same name.
func create(t *testing.T, r *Registry, owner string) string {
	t.Helper()
	id, err := r.Create(context.Background(), identity.Principal(owner), owner)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestIDsAreLongAndUnique(t *testing.T) {
	r, _, _ := registry(t, Config{Max: 100}, nil)
	seen := map[string]bool{}
	for range 100 {
		id := create(t, r, "a")
		if len(id) < 26 || seen[id] { // 26 base32 characters: 130 bits
			t.Fatalf("weak or repeated id %q", id)
		}
		seen[id] = true
	}
}

// Whoever did not make a session learns nothing from its id: the answer is
// the one an unknown id gets, word for word.
func TestOwnership(t *testing.T) {
	r, _, _ := registry(t, Config{}, nil)
	id := create(t, r, "alice")
	shared := create(t, r, "")
	unknown := "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"
	tests := []struct {
		name    string
		owner   identity.Principal
		id      string
		wantErr error
	}{
		{"owner", "alice", id, nil},
		{"another client", "mallory", id, ErrUnknown},
		{"no owner given", "", id, ErrUnknown},
		{"id alone is the capability", "mallory", shared, nil},
		{"unknown", "alice", unknown, ErrUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Run(context.Background(), tt.owner, tt.id, supervisor.Request{Code: "1"})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Run = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				_, unknownErr := r.Run(context.Background(), tt.owner, unknown, supervisor.Request{})
				if want := strings.ReplaceAll(unknownErr.Error(), unknown, tt.id); err.Error() != want {
					t.Errorf("error %q differs from an unknown id's %q", err, want)
				}
				if r.Close(tt.owner, tt.id) == nil {
					t.Error("Close by another client succeeded")
				}
			}
		})
	}
	// A closed session tells its owner, and only its owner, why.
	if err := r.Close("alice", id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), "alice", id, supervisor.Request{}); !errors.Is(err, ErrClosed) {
		t.Errorf("owner after close: %v, want ErrClosed", err)
	}
	if _, err := r.Run(context.Background(), "mallory", id, supervisor.Request{}); !errors.Is(err, ErrUnknown) {
		t.Errorf("another client after close: %v, want ErrUnknown", err)
	}
}

func TestCapNamesItself(t *testing.T) {
	r, _, _ := registry(t, Config{Max: 2}, nil)
	a := create(t, r, "a")
	create(t, r, "b")
	_, err := r.Create(context.Background(), "c", "")
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "maximum of 2 (--max-sessions)") {
		t.Fatalf("Create past the cap = %v", err)
	}
	if err := r.Close("a", a); err != nil {
		t.Fatal(err)
	}
	create(t, r, "c") // a slot is free again
}

// One owner cannot take every session: past its own cap it is told so,
// while others still get theirs; sessions that end, or fail to start,
// free their place. The owner "" is everyone the server cannot tell apart,
// and has the server's cap only.
func TestCapPerOwner(t *testing.T) {
	r, _, _ := registry(t, Config{Max: 5, MaxPerPrincipal: 2}, nil)
	a := create(t, r, "alice")
	create(t, r, "alice")
	_, err := r.Create(context.Background(), "alice", "")
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "maximum of 2 sessions one caller may hold (--max-sessions-per-principal)") {
		t.Fatalf("Create past the cap of its owner = %v", err)
	}
	create(t, r, "bob")
	create(t, r, "")
	create(t, r, "")
	if err := r.Close("alice", a); err != nil {
		t.Fatal(err)
	}
	create(t, r, "alice") // her place is free again

	failing := New(Config{Idle: time.Hour, Max: 5, MaxPerPrincipal: 1}, func(context.Context) (Interpreter, error) {
		return nil, errors.New("no worker")
	}, zap.NewNop())
	for range 2 {
		if _, err := failing.Create(context.Background(), "alice", ""); errors.Is(err, ErrTooMany) {
			t.Errorf("a session that failed to start still counts: %v", err)
		}
	}
}

// TestIdleSessionsExpireButNotDuringACall: on the bubble's clock, an idle
// session expires at its idle time and not before, and a call that
// outlasts the idle time keeps its session.
func TestIdleSessionsExpireButNotDuringACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idleTime = 50 * time.Millisecond
		release := make(chan struct{})
		r, made, ended := registry(t, Config{Idle: idleTime}, func(ctx context.Context, req supervisor.Request) (supervisor.Result, error) {
			if req.Code == "slow" {
				<-release
			}
			return supervisor.Result{Status: supervisor.StatusSuccess}, nil
		})
		busy := create(t, r, "a")
		idle := create(t, r, "a")
		done := make(chan error, 1)
		go func() {
			_, err := r.Run(context.Background(), "a", busy, supervisor.Request{Code: "slow"})
			done <- err
		}()
		time.Sleep(idleTime - time.Nanosecond)
		synctest.Wait()
		if got := ended(); len(got) != 0 {
			t.Errorf("ended %v before the idle time", got)
		}
		time.Sleep(3 * idleTime) // the call outlasts the idle time
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("a call longer than the idle time: %v", err)
		}
		if _, err := r.Run(context.Background(), "a", busy, supervisor.Request{}); err != nil {
			t.Errorf("session expired under its call: %v", err)
		}
		_, err := r.Run(context.Background(), "a", idle, supervisor.Request{})
		if !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "expired after 50ms") {
			t.Errorf("idle session: %v, want ErrExpired", err)
		}
		if got := ended(); len(got) != 1 || got[0] != idle {
			t.Errorf("ended %v, want [%s]", got, idle)
		}
		if !made()[1].closed.Load() {
			t.Error("the expired session's interpreter is not closed")
		}
	})
}

func TestLostSessionsEnd(t *testing.T) {
	tests := []struct {
		name string
		res  supervisor.Result
		err  error
	}{
		{"killed during the call", supervisor.Result{Status: supervisor.StatusRunError, SessionLost: true}, nil},
		{"gone before the call", supervisor.Result{}, fmt.Errorf("%w: its worker ended while idle", supervisor.ErrSessionLost)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, made, _ := registry(t, Config{}, func(context.Context, supervisor.Request) (supervisor.Result, error) { return tt.res, tt.err })
			id := create(t, r, "a")
			_, err := r.Run(context.Background(), "a", id, supervisor.Request{})
			if tt.err != nil && !errors.Is(err, ErrLost) {
				t.Errorf("first call: %v, want ErrLost", err)
			}
			if _, err := r.Run(context.Background(), "a", id, supervisor.Request{}); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "create_session") {
				t.Errorf("next call: %v, want ErrLost", err)
			}
			if r.Len() != 0 || !made()[0].closed.Load() {
				t.Errorf("lost session still live (%d) or its interpreter open", r.Len())
			}
		})
	}
}

func TestCloseMCPSessionAndShutdown(t *testing.T) {
	r, made, _ := registry(t, Config{Max: 5}, nil)
	a1, a2, b := create(t, r, "a"), create(t, r, "a"), create(t, r, "b")
	// The principal p owns sessions made in two MCP sessions.
	p1, err := r.Create(context.Background(), "p", "m1")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := r.Create(context.Background(), "p", "m2")
	if err != nil {
		t.Fatal(err)
	}
	r.CloseMCPSession("a")
	r.CloseMCPSession("m1")
	r.CloseMCPSession("")
	for _, tt := range []struct {
		owner identity.Principal
		id    string
	}{{"a", a1}, {"a", a2}, {"p", p1}} {
		if err := r.Check(tt.owner, tt.id); !errors.Is(err, ErrClosed) {
			t.Errorf("session of the ended MCP session: %v", err)
		}
	}
	for _, tt := range []struct {
		owner identity.Principal
		id    string
	}{{"b", b}, {"p", p2}} {
		if err := r.Check(tt.owner, tt.id); err != nil {
			t.Errorf("a session of another MCP session: %v", err)
		}
	}
	r.Shutdown()
	if !made()[2].closed.Load() || r.Len() != 0 {
		t.Error("Shutdown left a session")
	}
	if _, err := r.Create(context.Background(), "b", ""); err == nil {
		t.Error("Create after Shutdown succeeded")
	}
}

// TestEndFreesBeforeClosing checks that a session's files go before its
// interpreter is closed: a worker can take a while to die, and a session
// that calls already say has ended must not serve its files meanwhile.
func TestEndFreesBeforeClosing(t *testing.T) {
	var in *fake
	var openAtEnd []bool
	r := New(Config{Idle: time.Hour, Max: 1, OnEnd: func(string) { openAtEnd = append(openAtEnd, !in.closed.Load()) }},
		func(context.Context) (Interpreter, error) {
			in = &fake{}
			return in, nil
		}, zap.NewNop())
	id := create(t, r, "a")
	if err := r.Close("a", id); err != nil {
		t.Fatal(err)
	}
	if len(openAtEnd) != 1 || !openAtEnd[0] || !in.closed.Load() {
		t.Errorf("OnEnd calls with the interpreter open: %v, closed at last: %v; want [true], true", openAtEnd, in.closed.Load())
	}
}

// TestEndedSessionsForgotten: why a session ended is told for a day, to
// the nanosecond on the bubble's clock; after that its id is unknown.
func TestEndedSessionsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _, _ := registry(t, Config{}, nil)
		id := create(t, r, "a")
		if err := r.Close("a", id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(endedTTL - time.Nanosecond)
		if err := r.Check("a", id); !errors.Is(err, ErrClosed) {
			t.Errorf("Check just before the memory of it ends: %v, want ErrClosed", err)
		}
		time.Sleep(time.Nanosecond)
		if err := r.Check("a", id); !errors.Is(err, ErrUnknown) {
			t.Errorf("Check once forgotten: %v, want ErrUnknown", err)
		}
	})
}
