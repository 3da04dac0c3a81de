package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResourceMetadataURL(t *testing.T) {
	tests := []struct {
		resource string
		want     string // "" for an error
	}{
		{"https://mcp.example.com", "https://mcp.example.com/.well-known/oauth-protected-resource"},
		{"https://mcp.example.com/", "https://mcp.example.com/.well-known/oauth-protected-resource"},
		{"https://mcp.example.com/mcp", "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"},
		{"http://127.0.0.1:3001/a/mcp/", "http://127.0.0.1:3001/.well-known/oauth-protected-resource/a/mcp"},
		{"https://mcp.example.com/mcp?t=1", "https://mcp.example.com/.well-known/oauth-protected-resource/mcp?t=1"},
		{"https://mcp.example.com/mcp#x", ""},
		{"/mcp", ""},
		{"ftp://mcp.example.com/mcp", ""},
	}
	for _, tt := range tests {
		got, err := ResourceMetadataURL(tt.resource)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("ResourceMetadataURL(%q) = %q, %v; want %q", tt.resource, got, err, tt.want)
		}
	}
}

func TestProtectedResourceHandler(t *testing.T) {
	tests := []struct {
		name                 string
		authorizationServers []string
		scopes               []string
		want                 string
	}{
		{"all", []string{"https://as.example.com"}, []string{"mcp:run", "files:read"},
			`{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example.com"],"scopes_supported":["mcp:run","files:read"],"bearer_methods_supported":["header"]}`},
		{"no scopes", []string{"https://as.example.com"}, nil,
			`{"resource":"https://mcp.example.com/mcp","authorization_servers":["https://as.example.com"],"bearer_methods_supported":["header"]}`},
		{"nothing optional", nil, []string{},
			`{"resource":"https://mcp.example.com/mcp","bearer_methods_supported":["header"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := ProtectedResourceHandler("https://mcp.example.com/mcp", tt.authorizationServers, tt.scopes)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, ProtectedResourcePath+"/mcp", nil))
			if w.Code != http.StatusOK || w.Body.String() != tt.want {
				t.Errorf("GET: %d %s\nwant 200 %s", w.Code, w.Body, tt.want)
			}
			if got := w.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
		})
	}
	w := httptest.NewRecorder()
	ProtectedResourceHandler("https://mcp.example.com/mcp", nil, nil).ServeHTTP(w, httptest.NewRequest(http.MethodPost, ProtectedResourcePath, strings.NewReader("{}")))
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d, Allow %q", w.Code, w.Header().Get("Allow"))
	}
}
