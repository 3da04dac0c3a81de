package mcpserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// The refusals of a multi round-trip retry's requestState.
var (
	errStateForged  = errors.New("invalid requestState: this server did not make it (or has restarted since)")
	errStateForeign = errors.New("invalid requestState: it belongs to another caller")
	errStateExpired = errors.New("invalid requestState: it has expired, and its call with it")
	errStateUsed    = errors.New("invalid requestState: it was used already; retry with the requestState of the latest input_required result")
	errStateGone    = errors.New("invalid requestState: its call has ended (cancelled, timed out, or waited past --park-timeout)")
)

// stateClaims is what a requestState says: whose parked call, which round.
type stateClaims struct {
	Call      string             `json:"c"`
	Round     int                `json:"r"`
	Principal identity.Principal `json:"p"`
	Session   string             `json:"s"` // the MCP session, "" for none
	Expires   int64              `json:"e"` // Unix milliseconds
}

// stateSigner makes and checks requestStates: the claims as JSON, and their
// HMAC-SHA256 under a key of the process, both base64url. The state is
// opaque to the client; the signature makes it the server's own, and the
// claims bind it to its caller, its call and its round, which a parked
// call answers once (parkedCall.take).
type stateSigner struct {
	key []byte
}

// newStateSigner returns a signer with a random key: a restart refuses the
// states of before, whose calls are gone anyway.
func newStateSigner() stateSigner {
	key := make([]byte, sha256.Size)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return stateSigner{key: key}
}

// seal returns the requestState of c.
func (s stateSigner) seal(c stateClaims) string {
	payload, _ := json.Marshal(c) // strings and numbers
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

// mac is the signature of payload.
func (s stateSigner) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	return m.Sum(nil)
}

// open checks state, made by seal, for the caller principal of MCP session
// session at now, and returns its claims.
func (s stateSigner) open(state string, principal identity.Principal, session string, now time.Time) (stateClaims, error) {
	p, sig, ok := strings.Cut(state, ".")
	if !ok {
		return stateClaims{}, errStateForged
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac(payload)) {
		return stateClaims{}, errStateForged
	}
	var c stateClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return stateClaims{}, fmt.Errorf("%w: %w", errStateForged, err)
	}
	switch {
	case c.Principal != principal || c.Session != session:
		return stateClaims{}, errStateForeign
	case now.UnixMilli() >= c.Expires:
		return stateClaims{}, errStateExpired
	}
	return c, nil
}
