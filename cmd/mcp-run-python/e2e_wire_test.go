package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
)

// The handshake a script pipes into a stdio server, before its calls.
const (
	pipedInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + e2eProtocol + `","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`
	pipedInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// pipedCall is a tools/call request with id 2 running code.
func pipedCall(t *testing.T, code string) string {
	t.Helper()
	source, err := json.Marshal(code)
	if err != nil {
		t.Fatal(err)
	}
	return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_python_code","arguments":{"python_code":` + string(source) + `}}}`
}

// rawStdio is a stdio server process driven line by line, as a script
// drives one.
type rawStdio struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  <-chan string // stdout, line by line
	stderr *syncBuffer
	exited chan struct{} // closed once the process has exited
	err    error         // how it exited, once exited is closed
}

// startRawStdio starts a stdio server with flags. The test's cleanup closes
// its stdin and checks that it exits with status 0.
func startRawStdio(t *testing.T, s *e2eSetup, flags ...string) *rawStdio {
	t.Helper()
	cmd := exec.Command(s.bin, append(append(s.baseArgs(), flags...), modeStdio)...)
	cmd.Env = serverEnv()
	ownProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &rawStdio{cmd: cmd, stdin: stdin, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	p.lines = lines
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.exited:
			if p.err != nil {
				t.Errorf("stdio server: %v, want exit status 0; stderr:\n%s", p.err, p.stderr)
			}
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			t.Errorf("the stdio server did not stop at the end of stdin; stderr:\n%s", p.stderr)
		}
	})
	return p
}

// send writes lines to the server's stdin.
func (p *rawStdio) send(t *testing.T, lines ...string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, strings.Join(lines, "\n")+"\n"); err != nil {
		t.Fatalf("write to the server: %v", err)
	}
}

// next returns the next line the server writes, within d.
func (p *rawStdio) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("stdout ended; stderr:\n%s", p.stderr)
		}
		return line
	case <-time.After(within):
		t.Fatalf("no answer within %v; stderr:\n%s", within, p.stderr)
	}
	return ""
}

// until returns the next line the server writes that contains want,
// within callTimeout; it fails with the lines it skipped.
func (p *rawStdio) until(t *testing.T, want string) string {
	t.Helper()
	var skipped []string
	deadline := time.After(callTimeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("stdout ended before a line with %s, after:\n%s\nstderr:\n%s", want, strings.Join(skipped, "\n"), p.stderr)
			}
			if strings.Contains(line, want) {
				return line
			}
			skipped = append(skipped, line)
		case <-deadline:
			t.Fatalf("no line with %s within %v, after:\n%s\nstderr:\n%s", want, callTimeout, strings.Join(skipped, "\n"), p.stderr)
		}
	}
}

// TestE2EStdioPipedEOF: requests piped into the stdio server, stdin closed
// right after them, are answered in full before the server exits, as
// upstream's releases answer `printf '...' | mcp-run-python stdio`; and
// SIGTERM still stops such a server, its call cut at --shutdown-timeout.
func TestE2EStdioPipedEOF(t *testing.T) {
	s := setup(t)
	t.Run("answered", func(t *testing.T) {
		input := strings.Join([]string{pipedInitialize, pipedInitialized,
			pipedCall(t, "import time\ntime.sleep(1)\nprint('slept')\n'done'")}, "\n") + "\n"
		cmd := exec.Command(s.bin, append(s.baseArgs(), modeStdio)...)
		cmd.Env = serverEnv()
		cmd.Stdin = strings.NewReader(input) // closed once written
		var stdout bytes.Buffer
		stderr := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = &stdout, stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil {
				t.Fatalf("stdio server: %v; stderr:\n%s", err, stderr)
			}
		case <-time.After(callTimeout):
			_ = cmd.Process.Kill()
			t.Fatalf("the stdio server did not exit within %v of the end of its stdin; stderr:\n%s", callTimeout, stderr)
		}
		want := `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"<status>success</status>\n<output>\nslept\n</output>\n<return_value>\ndone\n</return_value>"}]}}` + "\n"
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the piped call's answer is not %s; stdout:\n%s\nstderr:\n%s", want, stdout.String(), stderr)
		}
		t.Logf("piped call answered and server exited in %v", time.Since(start).Round(time.Millisecond))
	})
	t.Run("SIGTERM", func(t *testing.T) {
		const shutdownTimeout = time.Second
		p := startRawStdio(t, s, "--workers", "1", "--shutdown-timeout", shutdownTimeout.String())
		p.send(t, pipedInitialize, pipedInitialized, pipedCall(t, "while True: pass"))
		_ = p.stdin.Close()
		busyWorker(t, p.cmd.Process.Pid, nil) // the call runs
		stopped := time.Now()
		if err := stopServer(p.cmd.Process); err != nil {
			t.Fatal(err)
		}
		if answer := p.until(t, `"id":2,`); !strings.Contains(answer, "the server is shutting down") {
			t.Errorf("the call's answer after SIGTERM: %s", answer)
		}
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			t.Fatalf("the stdio server did not exit within %v of SIGTERM; stderr:\n%s", stopTimeout, p.stderr)
		}
		t.Logf("exited %v after SIGTERM (--shutdown-timeout %v)", time.Since(stopped).Round(time.Millisecond), shutdownTimeout)
	})
}

// teeTransport copies every response body its client reads into raw.
type teeTransport struct {
	raw *syncBuffer
}

// RoundTrip implements http.RoundTripper.
func (tr teeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, tr.raw), resp.Body}
	}
	return resp, err
}

// wireCode prints and returns <, >, & and U+2028, and a backslash before
// "u003c", which must stay as it is.
const wireCode = "print('<b>&amp;</b>\\u2028')\n'<x> & \\\\u003c </x>'"

// TestE2EWireLiteral: every transport writes a result's text as upstream
// does (JSON.stringify, pydantic): <, >, & and U+2028 as they are, so that
// `mcp-run-python stdio | grep '<status>success</status>'` finds it.
func TestE2EWireLiteral(t *testing.T) {
	s := setup(t)
	check := func(t *testing.T, raw, text string) {
		t.Helper()
		if !strings.Contains(text, "<status>success</status>") || !strings.ContainsRune(text, '\u2028') || !strings.Contains(text, `& \u003c`) {
			t.Fatalf("the result does not hold what the test checks: %q", text)
		}
		var want strings.Builder
		want.WriteString(`"text":`)
		render.WriteJSString(&want, text)
		if !strings.Contains(raw, want.String()) {
			t.Errorf("the result's text on the wire is not upstream's %s; the wire had:\n%s", want.String(), raw)
		}
	}
	t.Run(modeStdio, func(t *testing.T) {
		p := startRawStdio(t, s)
		p.send(t, pipedInitialize, pipedInitialized, pipedCall(t, wireCode))
		line := p.until(t, `{"jsonrpc":"2.0","id":2,`)
		var answer struct {
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &answer); err != nil || len(answer.Result.Content) != 1 {
			t.Fatalf("answer %s: %v", line, err)
		}
		check(t, line, answer.Result.Content[0].Text)
	})
	for _, mode := range []string{modeSSE, modeStateful, modeStateless} {
		t.Run(mode, func(t *testing.T) {
			tg := startTarget(t, s, mode)
			raw := &syncBuffer{}
			tg.client = &http.Client{Transport: teeTransport{raw: raw}}
			c := tg.connect(t)
			text := c.run(t, wireCode)
			check(t, raw.String(), text)
		})
	}
}
