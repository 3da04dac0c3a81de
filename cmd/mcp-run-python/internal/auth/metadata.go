package auth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ProtectedResourcePath is the well-known path of RFC 9728 protected
// resource metadata. A resource with a path has its metadata at this path
// followed by its own (ResourceMetadataURL).
const ProtectedResourcePath = "/.well-known/oauth-protected-resource"

// ResourceMetadataURL returns where RFC 9728 §3.1 puts the metadata of
// resource, this server's resource identifier: ProtectedResourcePath
// inserted between its host and its path, e.g.
// https://h/.well-known/oauth-protected-resource/mcp for https://h/mcp.
//
// resource is the server's public URL as clients reach it, which the
// program is given rather than this package working it out from requests:
// behind a proxy that ends TLS a request does not tell the scheme clients
// used, and its Host header is the client's choice. Clients check that the
// metadata's resource is the URL they called (RFC 9728 §3.3), and they ask
// for tokens for it, so it is also the natural OAuth audience.
func ResourceMetadataURL(resource string) (string, error) {
	u, err := url.Parse(resource)
	if err != nil {
		return "", fmt.Errorf("resource: %w", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		// RFC 9728 §1.2: an absolute URL without fragment.
		return "", fmt.Errorf("resource %q is not an absolute http(s) URL without fragment", resource)
	}
	s := u.Scheme + "://" + u.Host + ProtectedResourcePath + strings.TrimSuffix(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		s += "?" + u.RawQuery
	}
	return s, nil
}

// ProtectedResourceHandler serves the RFC 9728 metadata of resource, which
// it should be mounted for at the path of ResourceMetadataURL(resource):
// the resource's identifier, the issuers whose tokens it takes and the
// scopes it knows. Empty lists are left out, as RFC 9728 §2 has them
// optional. It answers GET and HEAD.
func ProtectedResourceHandler(resource string, authorizationServers, scopes []string) http.Handler {
	body, _ := json.Marshal(struct { // strings cannot fail to marshal
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers,omitempty"`
		ScopesSupported      []string `json:"scopes_supported,omitempty"`
		BearerMethods        []string `json:"bearer_methods_supported"`
	}{resource, authorizationServers, scopes, []string{"header"}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}
