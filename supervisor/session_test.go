package supervisor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// newSession starts a session that ends with the test.
func newSession(t *testing.T, s *Supervisor) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ss, err := s.NewSession(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ss.Close)
	return ss
}

// runIn runs code in a session and fails the test if it could not run.
func runIn(t *testing.T, ss *Session, code string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := ss.Run(ctx, Request{Code: code})
	if err != nil {
		t.Fatalf("Run(%q): %v", code, err)
	}
	return res
}

func TestSessionKeepsStateBetweenCalls(t *testing.T) {
	s := start(t, Config{Workers: 1, Timeout: 2 * time.Second, Grace: 500 * time.Millisecond})
	ss := newSession(t, s)
	steps := []struct{ code, value string }{
		{"import json\nx = 41\nopen('notes.txt', 'w').write('kept')", "4"},
		{"x + 1", "42"},
		{"json.dumps([x])", `"[41]"`},
		{"open('notes.txt').read()", `"kept"`},
		// Stopped at the time limit, and ended within the grace: kept.
		{"x = 0\nwhile True: pass", ""},
		{"x", "0"},
	}
	for _, step := range steps {
		res := runIn(t, ss, step.code)
		if step.value == "" {
			if res.Status != StatusRunError || !strings.Contains(res.Error, "TimeoutError") || strings.Contains(res.Error, "lost") {
				t.Fatalf("%q: %s %q, want a TimeoutError that keeps the session", step.code, res.Status, res.Error)
			}
			continue
		}
		if res.Status != StatusSuccess || string(res.ReturnValue) != step.value {
			t.Fatalf("%q: %s %s %q, want %s", step.code, res.Status, res.ReturnValue, res.Error, step.value)
		}
	}
	// A fresh call shares nothing with the session.
	if res, _ := run(t, s, "x"); res.Status != StatusRunError || !strings.Contains(res.Error, "NameError") {
		t.Errorf("fresh call saw the session's x: %s %s", res.Status, res.ReturnValue)
	}
	if h := s.Health(); h.Sessions != 1 {
		t.Errorf("Health().Sessions = %d, want 1", h.Sessions)
	}
}

// A run that has to be killed takes the session's state with it: that call
// says so, and every later one fails.
func TestSessionKilledIsLost(t *testing.T) {
	s := start(t, Config{Workers: 1, Timeout: time.Second, Grace: 300 * time.Millisecond})
	tests := []struct {
		name, code string
		kill       func(t *testing.T, ss *Session)
		want       string
	}{
		{name: "time limit, interrupt ignored", code: "while True:\n    try:\n        while True: pass\n    except KeyboardInterrupt: pass",
			want: "killed with its worker"},
		{name: "os._exit", code: "import os; os._exit(1)", want: "exited with status 1"},
		{name: "killed while idle", kill: func(t *testing.T, ss *Session) { killPid(t, ss.w.Proc.Pid()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := newSession(t, s)
			runIn(t, ss, "x = 1")
			if tt.kill != nil {
				tt.kill(t, ss)
				<-ss.w.Ended()
			} else {
				res := runIn(t, ss, tt.code)
				if !strings.Contains(res.Error, tt.want) || !strings.Contains(res.Error, "the session's state was lost") {
					t.Fatalf("error %q, want %q and the loss of the session", res.Error, tt.want)
				}
			}
			_, err := ss.Run(context.Background(), Request{Code: "x"})
			if !errors.Is(err, ErrSessionLost) {
				t.Fatalf("next call: %v, want ErrSessionLost", err)
			}
		})
	}
	if h := s.Health(); h.Sessions != 0 {
		t.Errorf("Health().Sessions = %d after every session was lost, want 0", h.Sessions)
	}
}

func TestSessionsDoNotTakePoolWorkers(t *testing.T) {
	s := start(t, Config{Workers: 1})
	for range 2 {
		newSession(t, s)
	}
	if h := s.Health(); h.Warm != 1 || h.Sessions != 2 {
		t.Errorf("Health() = %+v, want the pool's worker warm beside 2 sessions", h)
	}
	if res, _ := run(t, s, "1"); res.Status != StatusSuccess {
		t.Errorf("fresh call beside sessions: %s %s", res.Status, res.Error)
	}
}

func TestClosedSessionEndsItsWorker(t *testing.T) {
	s := start(t, Config{Workers: 1})
	ss := newSession(t, s)
	ss.Close()
	select {
	case <-ss.w.Ended():
	case <-time.After(5 * time.Second):
		t.Fatal("the worker of a closed session is still running")
	}
	if _, err := ss.Run(context.Background(), Request{Code: "1"}); !errors.Is(err, ErrSessionLost) {
		t.Errorf("call in a closed session: %v, want ErrSessionLost", err)
	}
}
