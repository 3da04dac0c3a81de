package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
)

// maxTokenFile bounds the token file, so that pointing the flag at a big
// file by mistake fails rather than fills memory.
const maxTokenFile = 1 << 20

// StaticTokens authenticates callers by shared secrets listed in a file.
// It is safe for concurrent use, Reload included.
//
// A caller's principal is derived from the SHA-256 of its token, so a
// guessable token could be found from the logs: use long random ones,
// e.g. from `openssl rand -hex 32`.
type StaticTokens struct {
	path   string
	log    *zap.Logger
	tokens atomic.Pointer[[]staticToken]
}

// staticToken is a token as kept in memory: only its hash, which is what
// Authenticate compares.
type staticToken struct {
	sum [sha256.Size]byte
	id  identity.Principal
}

// NewStaticTokens reads the tokens in the file at path: one a line, with
// surrounding white space, blank lines and lines starting with # ignored.
// The file must be a regular file (a symbolic link to one is fine), hold a
// token and, on Unix, be readable by no one but its
// owner and its group, and writable by its owner only. log may be nil.
func NewStaticTokens(path string, log *zap.Logger) (*StaticTokens, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s := &StaticTokens{path: path, log: log}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the file again and replaces the tokens at once. If it fails,
// the tokens read before stay in use, so that a bad edit does not lock
// every caller out.
func (s *StaticTokens) Reload() error {
	tokens, err := readTokens(s.path)
	if err != nil {
		return fmt.Errorf("read static tokens: %w", err)
	}
	s.tokens.Store(&tokens)
	s.log.Info("read static tokens", zap.String("file", s.path), zap.Int("tokens", len(tokens)))
	return nil
}

// Authenticate returns the principal of token if it is one of the file's.
//
// It compares hashes, so that the time taken does not depend on the
// tokens' lengths, and compares with every token without stopping at a
// match, so that it does not tell which token nearly matched.
func (s *StaticTokens) Authenticate(_ context.Context, token string) (identity.Principal, error) {
	sum := sha256.Sum256([]byte(token))
	tokens := *s.tokens.Load()
	match, at := 0, 0
	for i := range tokens {
		eq := subtle.ConstantTimeCompare(sum[:], tokens[i].sum[:])
		at = subtle.ConstantTimeSelect(eq, i, at)
		match |= eq
	}
	if match == 0 {
		return "", invalid("unknown token", nil)
	}
	return tokens[at].id, nil
}

// readTokens reads and checks the token file at path.
func readTokens(path string) ([]staticToken, error) {
	f, err := openSecret(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	// Stat the open file, not the path, so that what is checked is what
	// is read.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		// A FIFO or a device could make the read wait for ever, or never
		// end.
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if err := checkPrivate(path, fi); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTokenFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxTokenFile)
	}
	var tokens []staticToken
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		// The error names the line, never the token.
		if !isB64Token(string(line)) {
			return nil, fmt.Errorf("%s:%d: not a bearer token: it may hold only letters, digits and -._~+/, then = padding", path, i+1)
		}
		sum := sha256.Sum256(line)
		tokens = append(tokens, staticToken{sum: sum, id: identity.Principal("token:" + hex.EncodeToString(sum[:8]))})
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%s holds no token", path)
	}
	return tokens, nil
}
