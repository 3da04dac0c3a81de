package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxMetadataSize bounds an authorization server's metadata document, which
// is a few kilobytes, so that a broken server cannot make us read forever.
const maxMetadataSize = 1 << 20

// errNoMetadata says that every metadata URL answered, and none with usable
// metadata for the issuer: the issuer is misconfigured rather than down.
var errNoMetadata = errors.New("no usable authorization server metadata")

// metadataURLs returns where the metadata of issuer may be, in the order that
// the MCP authorization spec tries them: RFC 8414 §3.1's (the well-known
// path inserted before the issuer's path), then OpenID Connect's inserted
// the same way, then OpenID Connect Discovery 1.0's own (appended).
func metadataURLs(issuer *url.URL) []string {
	origin := issuer.Scheme + "://" + issuer.Host
	path := strings.TrimSuffix(issuer.EscapedPath(), "/")
	if path == "" {
		return []string{
			origin + "/.well-known/oauth-authorization-server",
			origin + "/.well-known/openid-configuration",
		}
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}
}

// discover returns the jwks_uri of issuer's metadata. The error wraps
// errNoMetadata when every URL gave a definite answer that is no use, so
// that a typo in the issuer can stop the program at start while an issuer
// that is down does not.
func discover(ctx context.Context, client *http.Client, issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return "", fmt.Errorf("parse issuer: %w", err)
	}
	var errs []error
	definite := true
	for _, m := range metadataURLs(u) {
		jwksURI, permanent, err := fetchMetadata(ctx, client, m, issuer)
		if err == nil {
			return jwksURI, nil
		}
		errs = append(errs, err)
		definite = definite && permanent
	}
	err = errors.Join(errs...)
	if definite {
		return "", fmt.Errorf("discover %s: %w: %w", issuer, errNoMetadata, err)
	}
	return "", fmt.Errorf("discover %s: %w", issuer, err)
}

// fetchMetadata returns the jwks_uri of the metadata at u, which must be
// issuer's, and whether a failure is permanent (the server answered, but
// not with good metadata) rather than one worth retrying.
func fetchMetadata(ctx context.Context, client *http.Client, u, issuer string) (jwksURI string, permanent bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", true, fmt.Errorf("%s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		// A refused redirect is the issuer's answer, not an outage.
		return "", errors.Is(err, errRedirect), fmt.Errorf("%s: %w", u, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		// A 4xx is the server saying there is nothing here, except for the
		// two that ask to come back later.
		permanent := resp.StatusCode >= 400 && resp.StatusCode < 500 &&
			resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests
		return "", permanent, fmt.Errorf("%s: HTTP status %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataSize+1))
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", u, err)
	}
	if len(body) > maxMetadataSize {
		return "", true, fmt.Errorf("%s: metadata larger than %d bytes", u, maxMetadataSize)
	}
	var md struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &md); err != nil {
		return "", true, fmt.Errorf("%s: %w", u, err)
	}
	// RFC 8414 §3.3: metadata naming another issuer must not be used, or a
	// server could pass off its keys as another's.
	if md.Issuer != issuer {
		return "", true, fmt.Errorf("%s: metadata names issuer %q, not %q", u, md.Issuer, issuer)
	}
	if md.JWKSURI == "" {
		return "", true, fmt.Errorf("%s: metadata has no jwks_uri", u)
	}
	if err := checkServerURL(md.JWKSURI); err != nil {
		return "", true, fmt.Errorf("%s: jwks_uri: %w", u, err)
	}
	return md.JWKSURI, false, nil
}

// checkServerURL refuses a URL of the authorization server's that is not
// https: keys fetched over plain HTTP could be anyone's. Plain HTTP to a
// loopback address is allowed for development, since it does not leave the
// machine.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("parse %q: %w", s, err)
	}
	if u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", s)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%q is not an https URL", s)
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
