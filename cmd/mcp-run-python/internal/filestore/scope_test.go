package filestore

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"a", true},
		{"a/b/c.txt", true},
		{"...", true},
		{".hidden", true},
		{"a..b", true},
		{"a b?.png", true},
		{`back\slash`, true},
		{"ü/😀", true},
		{strings.Repeat("a", maxPathLen), true},
		{"", false},
		{".", false},
		{"..", false},
		{"../a", false},
		{"a/..", false},
		{"a/../b", false},
		{"./a", false},
		{"a/./b", false},
		{"a//b", false},
		{"a/", false},
		{"/a", false},
		{"/", false},
		{"a\x00b", false},
		{"\xff.txt", false},
		{strings.Repeat("a", maxPathLen+1), false},
	}
	for _, tt := range tests {
		err := checkPath(tt.path)
		if (err == nil) != tt.ok {
			t.Errorf("checkPath(%q) = %v, want ok %v", tt.path, err, tt.ok)
		}
		if err != nil && !errors.Is(err, errBadPath) {
			t.Errorf("checkPath(%q) = %v, not an errBadPath", tt.path, err)
		}
	}
}

func TestScopeValid(t *testing.T) {
	tests := []struct {
		scope Scope
		ok    bool
	}{
		{SessionScope("mcp-session-0b5e2c1a-1f2d-4c3b-9a8e-7d6c5b4a3f2e"), true},
		{SessionScope("A.b_c~1"), true},
		{NewCallScope(), true},
		{Scope{}, false},
		{SessionScope(""), false},
		{SessionScope("a/b"), false},
		{SessionScope("a:b"), false},
		{SessionScope("a@b"), false},
		{SessionScope("a%41"), false},
		{SessionScope("a b"), false},
		{SessionScope("ü"), false},
		{SessionScope(strings.Repeat("a", maxIDLen+1)), false},
	}
	for _, tt := range tests {
		if got := tt.scope.valid(); got != tt.ok {
			t.Errorf("%q valid = %v, want %v", tt.scope.id, got, tt.ok)
		}
	}
}

func TestNewCallScope(t *testing.T) {
	a, b := NewCallScope(), NewCallScope()
	if a == b {
		t.Fatal("two call scopes are the same")
	}
	if !a.call || SessionScope("s").call {
		t.Error("a call scope is not marked as one, or a session scope is")
	}
	// 128 bits, in a form that survives a client folding the host's case.
	if !isRandomName(a.id) {
		t.Errorf("call id %q is not 32 lowercase hex digits", a.id)
	}
	u, err := url.Parse(a.uri("x"))
	if err != nil || u.Scheme != "call" || u.Host != a.id || u.Path != "/x" {
		t.Errorf("url.Parse(%q) = %v, %v", a.uri("x"), u, err)
	}
}

func TestParseURI(t *testing.T) {
	sc := SessionScope("s1")
	tests := []struct {
		uri  string
		path string // "" if not valid
	}{
		{"session://s1/a.txt", "a.txt"},
		{"session://s1/d/a%20b%3F.png", "d/a b?.png"},
		{"session://s1/a%2Etxt", "a.txt"}, // another escaping of the same name
		{"session://s1/%2541", "%41"},
		{"session://s1/%41", "A"},
		{"session://s1/a%2Fb", ""},
		{"session://s1/%2e%2e/x", ""},
		{"session://s1/./a.txt", ""},
		{"session://s1//a.txt", ""},
		{"session://s1/a.txt?x=1", ""},
		{"session://s1/a.txt#top", ""},
		{"session://s1/a%zz", ""},
		{"session://s1/", ""},
		{"session://s1", ""},
		{"session:///a.txt", ""},
		{"session://s%31/a.txt", ""},
		{"SESSION://s1/a.txt", ""},
		{"file:///etc/passwd", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, p, ok := parseURI(tt.uri)
		if ok != (tt.path != "") || p != tt.path || ok && got != sc {
			t.Errorf("parseURI(%q) = %v, %q, %v; want %q", tt.uri, got, p, ok, tt.path)
		}
	}
}
