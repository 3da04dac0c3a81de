package sessions

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// losableFake is an interpreter that can be lost between calls, as a
// supervisor's session is when its worker passes a limit.
type losableFake struct {
	fake
	done    chan struct{}
	endOnce sync.Once
	why     error
}

func (f *losableFake) Done() <-chan struct{} { return f.done }

func (f *losableFake) Err() error {
	select {
	case <-f.done:
		return f.why
	default:
		return nil
	}
}

// lose ends the interpreter for why (nil: closed).
func (f *losableFake) lose(why error) {
	f.endOnce.Do(func() {
		f.why = why
		close(f.done)
	})
}

func (f *losableFake) Close() {
	f.fake.Close()
	f.lose(nil)
}

// A session whose interpreter is lost between calls ends at once: its slot
// and files are freed, and every call naming it says why.
func TestSessionLostBetweenCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var made []*losableFake
		endedIDs := make(chan string, 4)
		r := New(Config{Idle: time.Hour, Max: 1, OnEnd: func(id string) { endedIDs <- id }},
			func(context.Context) (Interpreter, error) {
				mu.Lock()
				defer mu.Unlock()
				f := &losableFake{done: make(chan struct{})}
				made = append(made, f)
				return f, nil
			}, zap.NewNop())
		t.Cleanup(r.Shutdown)
		ctx := context.Background()

		id, err := r.Create(ctx, "alice", "alice")
		if err != nil {
			t.Fatal(err)
		}
		why := errors.New("its worker was killed between calls: it used 401 MiB of memory, more than the 400 MiB limit")
		made[0].lose(why)
		synctest.Wait()
		select {
		case got := <-endedIDs:
			if got != id {
				t.Fatalf("OnEnd(%q), want %q", got, id)
			}
		default:
			t.Fatal("the lost session did not end")
		}
		if n := r.Len(); n != 0 {
			t.Errorf("Len() = %d after the loss, want 0", n)
		}
		err = r.Check("alice", id)
		if !errors.Is(err, ErrLost) || !errors.Is(err, why) || !strings.Contains(err.Error(), id) {
			t.Errorf("Check after the loss: %v, want ErrLost naming the session and why", err)
		}
		if _, err := r.Run(ctx, "alice", id, supervisor.Request{Code: "1"}); !errors.Is(err, why) {
			t.Errorf("Run after the loss: %v, want why", err)
		}
		// The slot is free.
		other, err := r.Create(ctx, "alice", "alice")
		if err != nil {
			t.Fatalf("create after the loss: %v", err)
		}
		// A closed interpreter is not lost: Close says closed.
		if err := r.Close("alice", other); err != nil {
			t.Fatal(err)
		}
		if err := r.Check("alice", other); !errors.Is(err, ErrClosed) {
			t.Errorf("Check after close_session: %v, want ErrClosed", err)
		}
	})
}
