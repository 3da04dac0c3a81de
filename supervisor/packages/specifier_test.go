package packages

import (
	"testing"
)

// TestSpecifierAgainstPackaging checks operator semantics, pre-releases
// allowed, against the answers of pip's vendored "packaging" (21.3), which
// were computed once with Specifier.contains(v, prereleases=True).
func TestSpecifierAgainstPackaging(t *testing.T) {
	tests := []struct {
		spec, version string
		want          bool
	}{
		{"~=2.2", "2.2", true},
		{"~=2.2", "2.3", true},
		{"~=2.2", "3.0", false},
		{"~=2.2", "2.1", false},
		{"~=2.2.0", "2.2.5", true},
		{"~=2.2.0", "2.3.0", false},
		{"~=1.4.5a4", "1.4.5", true},
		{"~=1.4.5a4", "1.4.9", true},
		{"~=1.4.5a4", "1.5.0", false},
		{"~=2.2.post3", "2.3", true},
		{"~=2.2.post3", "2.2.post2", false},
		{"~=2.2.post3", "3.0", false},
		{"===1.0", "1.0", true},
		{"===1.0", "1.0.0", false},
		{"===1.0", "1.0+local", false},
		{"==1.0", "1.0+local", true},
		{"==1.0+local", "1.0", false},
		{"==1.0+local", "1.0+local", true},
		{"==1.0+abc", "1.0+local", false},
		{"==1.*", "1.5", true},
		{"==1.*", "2.0", false},
		{"==1.*", "1.0a1", true},
		{"==1.0.*", "1.0", true},
		{"==1.0.*", "1.0.post1", true},
		{"!=1.*", "1.5", false},
		{"!=1.0", "1.0.0", false},
		{">=1.0", "2.0a1", true},
		{">=1.0", "1.0a1", false},
		{">=1.0", "1.0.post1", true},
		{">1.0", "1.0.post1", false},
		{">1.0", "1.0+local", false},
		{">1.0", "1.1", true},
		{">1.0.post1", "1.0.post2", true},
		{"<2.0", "2.0a1", false},
		{"<2.0", "1.9", true},
		{"<2.0", "2.0.dev1", false},
		{"<2.0a2", "2.0a1", true},
		{"<=2.0", "2.0+local", true},
		{"<=2.0", "2.0.post1", false},
		{">=1.0,<2.0", "1.5", true},
		{">=1.0,<2.0", "2.0", false},
		{"==2.0", "2", true},
		{"==2", "2.0.0", true},
		{"==1!1.0", "1.0", false},
		{">=1!0", "2.0", false},
		{"==1.0rc1", "1.0c1", true},
		{"==1.0.dev0", "1.0.dev", true},
		{">=1.0", "1.0.0", true},
		{"<1.0", "0.9.9", true},
		{"<1.0.0", "1.0", false},
		{"==1.0a1", "1.0alpha1", true},
		{">1.0a1", "1.0a2", true},
		{"<1.0", "1.0.post1", false},
		{"<=1.0", "1.0a1", true},
		{">=1.2.3", "1.10", true},
		{"<1.10", "1.9", true},
		{">=2.0b1", "2.0", true},
		{"==2.0.*", "2.0.1", true},
		{"!=2.0.*", "2.1", true},
		{"~=1.0", "1.0.post1", true},
		{">=1.0.dev1", "1.0.dev2", true},
		{"<1.0.dev1", "1.0.dev0", true},
		{"==1.0", "1.0.0+abc", true},
	}
	for _, tc := range tests {
		t.Run(tc.spec+" "+tc.version, func(t *testing.T) {
			s, err := ParseSpecifier(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Allows(tc.version); got != tc.want {
				t.Errorf("%s allows %s = %v, want %v", tc.spec, tc.version, got, tc.want)
			}
		})
	}
}

func TestParseSpecifier(t *testing.T) {
	tests := []struct {
		in      string
		str     string
		pre     bool
		pinned  bool
		wantErr bool
	}{
		{in: "", str: ""},
		{in: "  ", str: ""},
		{in: ">=1.0, <2", str: ">=1.0,<2"},
		{in: "== 1.0", str: "==1.0", pinned: true},
		{in: "==1.*", str: "==1.*"},
		{in: "===foobar", str: "===foobar", pinned: true},
		{in: ">=2.0b1", str: ">=2.0b1", pre: true},
		{in: "~=1.0rc1", str: "~=1.0rc1", pre: true},
		{in: "<2.0a1", str: "<2.0a1"}, // "<" does not ask for pre-releases
		{in: "==2.0.dev1.*", wantErr: true},
		{in: ">=1.0.*", wantErr: true},
		{in: "~=1", wantErr: true},
		{in: ">=", wantErr: true},
		{in: "1.0", wantErr: true},
		{in: ">=1.0,", wantErr: true},
		{in: "=>1.0", wantErr: true},
		{in: ">=1.0 || <0.5", wantErr: true},
		{in: "<=1.0+local", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			s, err := ParseSpecifier(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parsed as %q", s)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tc.str || s.Prereleases() != tc.pre || s.pinned() != tc.pinned {
				t.Errorf("got %q pre=%v pinned=%v", s, s.Prereleases(), s.pinned())
			}
		})
	}
	if s, _ := ParseSpecifier("===foobar"); !s.Allows("FooBar") || s.Allows("1.0") {
		t.Error("=== must compare strings")
	}
}
