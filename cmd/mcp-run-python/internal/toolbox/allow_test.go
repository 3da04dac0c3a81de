package toolbox

import (
	"slices"
	"testing"
)

func TestAllow(t *testing.T) {
	type call struct {
		server, tool string
		want         bool
	}
	tests := []struct {
		name  string
		allow string
		calls []call
	}{
		{"empty allows all", "", []call{{"calc", "add", true}, {"web", "get", true}}},
		{"blank allows all", "  ", []call{{"calc", "add", true}}},
		{"one tool", "calc.add", []call{{"calc", "add", true}, {"calc", "sub", false}, {"web", "add", false}}},
		{"a server", "calc.*", []call{{"calc", "add", true}, {"calc", "sub", true}, {"web", "get", false}}},
		{"a list, spaced", " calc.add , web.* ", []call{{"calc", "add", true}, {"calc", "sub", false}, {"web", "get", true}}},
		{"dots in names", "my.server.get.all", []call{{"my.server", "get.all", true}, {"my", "server.get.all", true}, {"my.server", "get", false}}},
		{"wildcard is only the whole tool", "calc.a*", []call{{"calc", "a*", true}, {"calc", "add", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseAllow(tt.allow)
			if err != nil {
				t.Fatalf("ParseAllow(%q): %v", tt.allow, err)
			}
			for _, c := range tt.calls {
				if got := a.Allows(c.server, c.tool); got != c.want {
					t.Errorf("Allows(%q, %q) = %v, want %v", c.server, c.tool, got, c.want)
				}
			}
		})
	}
}

func TestParseAllowErrors(t *testing.T) {
	for _, s := range []string{"calc", "calc.", ".add", "calc.add,,web.*", "calc.add,", "*"} {
		_, err := ParseAllow(s)
		wantError(t, err, "is not server.tool or server.*")
	}
}

func TestAllowUnknown(t *testing.T) {
	cfg := Config{Servers: []ServerConfig{{Name: "calc"}, {Name: "my.web"}}}
	a, err := ParseAllow("calc.add,clac.add,my.web.get,web.*,calc.*")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.unknown(cfg), []string{"clac.add", "web.*"}; !slices.Equal(got, want) {
		t.Errorf("unknown = %q, want %q", got, want)
	}
}
