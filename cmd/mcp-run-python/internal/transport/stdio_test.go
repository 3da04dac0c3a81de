package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcpserver"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/mcptest"
)

// pipedInput is what a script pipes into a stdio server: the handshake
// and two calls that a Blocker holds, then a ping on a last line without a
// newline, which mcp-go drops.
var pipedInput = strings.Join([]string{
	initializeBody(1),
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	blockCall(3),
	blockCall(4),
	`{"jsonrpc":"2.0","id":9,"method":"ping"}`,
}, "\n")

// blockCall is a tools/call request, with id, of the code a Blocker holds.
func blockCall(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":%q}}}`,
		id, mcptest.BlockCode)
}

// serveInput serves o over stdio on input, which ends at once, until ctx
// ends; it returns what the server wrote, once it has returned, and the
// channel of its return.
func serveInput(ctx context.Context, o Options, input string) (*bytes.Buffer, <-chan error) {
	out := &bytes.Buffer{}
	done := make(chan error, 1)
	go func() { done <- ServeStdio(ctx, o, 2, strings.NewReader(input), out) }()
	return out, done
}

// TestStdioAnswersAtEOF: requests piped in, with stdin ended right after
// them, are all answered: the end of stdin waits for the calls in flight,
// which finish, and their answers are written before ServeStdio returns.
// (Not under synctest: mcp-go's stdio server waits on a channel made
// outside any bubble.)
func TestStdioAnswersAtEOF(t *testing.T) {
	b := mcptest.NewBlocker()
	out, done := serveInput(t.Context(), testOptions(&mcptest.FakeRunner{Block: b.Block}), pipedInput)
	b.WaitStarted(t)
	b.WaitStarted(t)
	select {
	case err := <-done:
		t.Fatalf("ServeStdio returned (%v) with two calls in flight", err)
	default:
	}
	close(b.Release)
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	for _, id := range []int{3, 4} {
		// ServeStdio has returned: every call is over.
		select {
		case err := <-b.Released:
			if err != nil {
				t.Errorf("a call's context ended (%v) before it finished", err)
			}
		default:
			t.Errorf("a call was cancelled before it was released")
		}
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":%q}]}}`,
			id, mcptest.ExpectedXML(mcptest.BlockCode, 0))
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("no answer %s; the server wrote:\n%s", want, out)
		}
	}
	if strings.Contains(out.String(), `"id":9`) {
		t.Errorf("the last line, without a newline, was answered:\n%s", out)
	}
}

// TestStdioShutdownAtEOF: a shutdown (SIGTERM) while the calls of a piped
// input run ends them as it does with stdin open: past the shutdown's
// timeout (none here) they are cancelled and answered, and ServeStdio
// returns, where the calls themselves would never end.
func TestStdioShutdownAtEOF(t *testing.T) {
	b := mcptest.NewBlocker()
	o := testOptions(&mcptest.FakeRunner{Block: b.Block})
	o.Calls = mcpserver.NewCallGate(0, mcptest.Timeout)
	ctx, shutdown := context.WithCancel(t.Context())
	out, done := serveInput(ctx, o, pipedInput)
	b.WaitStarted(t)
	b.WaitStarted(t)
	shutdown()
	for range 2 {
		if c := b.WaitCancelled(t); !errors.Is(c.Cause, mcpserver.ErrShuttingDown) {
			t.Errorf("a call was cancelled by %v, want the shutdown", c.Cause)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-mcptest.Context(t).Done():
		t.Fatal("ServeStdio did not return after the shutdown")
	}
	for _, id := range []int{3, 4} {
		if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"the call was cancelled: the server is shutting down`, id); !strings.Contains(out.String(), want) {
			t.Errorf("no answer %s…; the server wrote:\n%s", want, out)
		}
	}
}
