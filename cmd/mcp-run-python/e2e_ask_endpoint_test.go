package main_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// standInKeyPrefix starts the stand-in's key: code looks for it, never
// knowing the rest.
const standInKeyPrefix = "sk-e2e-"

// standInModel is an OpenAI-compatible chat completions server on
// 127.0.0.1, in the test process: real HTTP and JSON. It answers "re: "
// and the user's message, and the prompt "echo" with an error that repeats
// the request's Authorization header, as a careless proxy might. Each
// request whose prompt starts with "gated " waits until gate such requests
// are in flight, and then for gateHold more, so that a server sending more than gate at once shows
// them all at the stand-in (one sending fewer is slowed by gateWait, not
// stuck).
type standInModel struct {
	*httptest.Server
	key  string
	gate int

	mu       sync.Mutex
	open     chan struct{} // closed when gate requests are in flight
	inFlight int
	most     int
	auth     []string // each request's Authorization header
	models   []string // each request's model
}

const (
	// gateHold is how long a full cohort is held: time for requests past
	// the server's limit, were there any, to arrive beside it.
	gateHold = 300 * time.Millisecond
	// gateWait bounds a request's wait for its cohort.
	gateWait = 5 * time.Second
)

// newStandInModel starts a stand-in with a fresh key.
func newStandInModel(t *testing.T, gate int) *standInModel {
	t.Helper()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	m := &standInModel{key: standInKeyPrefix + hex.EncodeToString(b), gate: gate, open: make(chan struct{})}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *standInModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, "not a chat completion", http.StatusBadRequest)
		return
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	m.mu.Lock()
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	m.models = append(m.models, req.Model)
	m.mu.Unlock()
	switch {
	case prompt == "echo":
		http.Error(w, "upstream refused: "+r.Header.Get("Authorization"), http.StatusBadGateway)
		return
	case strings.HasPrefix(prompt, "gated "):
		m.waitForCohort()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "re: " + prompt}}}})
}

// waitForCohort holds a request until gate are in flight, and gateHold
// more.
func (m *standInModel) waitForCohort() {
	m.mu.Lock()
	m.inFlight++
	m.most = max(m.most, m.inFlight)
	open := m.open
	if m.inFlight == m.gate {
		time.AfterFunc(gateHold, func() { close(open) })
		m.open = make(chan struct{})
	}
	m.mu.Unlock()
	select {
	case <-open:
	case <-time.After(gateWait):
	}
	m.mu.Lock()
	m.inFlight--
	m.mu.Unlock()
}

// endpointCode asks a batch of twelve (with a model_hint the endpoint must
// not get), 100 questions one after the other, then a prompt the stand-in
// answers with the key in its error, and looks for the key in its environment, the key file and the files it
// can read.
const endpointCode = `import os
answers = llm_query_batched([f"gated {i}" for i in range(12)], model_hint="gpt-steered")
answers += [llm_query(f"s{i}") for i in range(100)]
try:
    llm_query("echo")
except LLMQueryError as e:
    echoed = str(e)
found = [k for k, v in os.environ.items() if PREFIX in k + v]
try:
    open(KEY_FILE).read()
except OSError as e:
    found.append(type(e).__name__)
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/dev", "/proc", "/sys", "/lib")]
    for name in files:
        try:
            with open(os.path.join(root, name), "rb") as f:
                if PREFIX.encode() in f.read(1 << 20):
                    found.append(os.path.join(root, name))
        except OSError:
            pass
print(answers == [f"re: gated {i}" for i in range(12)] + [f"re: s{i}" for i in range(100)])
print(echoed)
found`

// TestE2EAskEndpoint runs the endpoint path through the real binary: a
// client without the sampling capability, --llm-url at a stand-in on
// 127.0.0.1 with --llm-model and --llm-key-file. 112 questions are
// answered; the key and the model reach the stand-in, the model_hint does not; code finds the key neither
// in its environment, nor in the files it can open, nor in an error that
// echoed it; and a batch of twelve holds --llm-concurrency 3 at the
// stand-in.
func TestE2EAskEndpoint(t *testing.T) {
	s := setup(t)
	const concurrency = 3
	model := newStandInModel(t, concurrency)
	keyFile := filepath.Join(t.TempDir(), "llm-key")
	if err := os.WriteFile(keyFile, []byte(model.key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := startTarget(t, s, modeStateful, "--sampling", "--llm-url", model.URL+"/v1", "--llm-model", "e2e-model",
		"--llm-key-file", keyFile, "--llm-concurrency", strconv.Itoa(concurrency), "--llm-requests", "200")
	c := tg.connect(t)
	code := "PREFIX = " + pyString(standInKeyPrefix) + "\nKEY_FILE = " + pyString(keyFile) + "\n" + endpointCode
	c.expectRun(t, code, "<status>success</status>\n<output>\nTrue\n"+
		"the model's endpoint answered 502 Bad Gateway: upstream refused: Bearer [the key]\n\n"+
		"</output>\n<return_value>\n[\n  \"FileNotFoundError\"\n]\n</return_value>")

	model.mu.Lock()
	defer model.mu.Unlock()
	if model.most != concurrency {
		t.Errorf("%d requests in flight at once at the endpoint, want --llm-concurrency's %d", model.most, concurrency)
	}
	if len(model.auth) != 113 {
		t.Errorf("the endpoint got %d requests, want 113", len(model.auth))
	}
	for i := range model.auth {
		if model.auth[i] != "Bearer "+model.key || model.models[i] != "e2e-model" {
			t.Errorf("request %d: Authorization %q, model %q; want the key and --llm-model", i, model.auth[i], model.models[i])
		}
	}
	if strings.Contains(tg.stderr.String(), model.key) {
		t.Errorf("the server's log holds the key:\n%s", tg.stderr)
	}
}

// pyString is s as a Python string literal.
func pyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
