package packages

import (
	"maps"
	"slices"
	"testing"
)

func TestGuessImports(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		want       []string
	}{
		{"plain", "import requests\nrequests.get('x')", []string{"requests"}},
		{"dotted_and_alias", "import a.b as c, d\n", []string{"a", "d"}},
		{"from", "from sympy.abc import x\nfrom numpy import (\n  array,\n)", []string{"numpy", "sympy"}},
		{"indented", "def f():\n    import json\n\tfrom os import path", []string{"json", "os"}},
		{"semicolons", "x = 1; import yaml; from bs4 import BeautifulSoup", []string{"bs4", "yaml"}},
		{"relative", "from . import a\nfrom .b import c\nfrom .. import d", nil},
		{"not_statements", "important = 1\nfromage = 2\nimport_ = 3\nprint('x') # import os\n", nil},
		{"no_imports", "1 + 1", nil},
		{"crlf", "import a\r\nimport b\r\n", []string{"a", "b"}},
		{"unicode", "import café", []string{"café"}},
		{"garbage", "import 1x, (y)\nfrom", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(GuessImports(tc.code)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("GuessImports(%q) = %q, want %q", tc.code, got, tc.want)
			}
		})
	}
}
