package pubgrub

import (
	"context"
	"errors"
	"maps"
	"testing"
)

// The examples of pub's doc/solver.md ("Examples"), with "^1.0.0" written
// as the PEP 440 ">=1,<2", plus the cases the issue names.
func TestSolve(t *testing.T) {
	tests := []struct {
		name string
		idx  index
		root []string
		want map[string]Version // nil: no solution
		// explain is the whole explanation when want is nil.
		explain string
	}{
		{
			name: "no conflicts",
			idx: index{
				"foo": {"1.0.0": {"bar >=1,<2"}},
				"bar": {"1.0.0": nil, "2.0.0": nil},
			},
			root: []string{"foo >=1,<2"},
			want: map[string]Version{"foo": "1.0.0", "bar": "1.0.0"},
		},
		{
			name: "avoiding conflict during decision making",
			idx: index{
				"foo": {"1.1.0": {"bar >=2,<3"}, "1.0.0": nil},
				"bar": {"1.0.0": nil, "1.1.0": nil, "2.0.0": nil},
			},
			root: []string{"foo >=1,<2", "bar >=1,<2"},
			want: map[string]Version{"foo": "1.0.0", "bar": "1.1.0"},
		},
		{
			name: "performing conflict resolution",
			idx: index{
				"foo": {"2.0.0": {"bar >=1,<2"}, "1.0.0": nil},
				"bar": {"1.0.0": {"foo >=1,<2"}},
			},
			root: []string{"foo >=1"},
			want: map[string]Version{"foo": "1.0.0"},
		},
		{
			name: "conflict resolution with a partial satisfier",
			idx: index{
				"foo":    {"1.1.0": {"left >=1,<2", "right >=1,<2"}, "1.0.0": nil},
				"left":   {"1.0.0": {"shared >=1"}},
				"right":  {"1.0.0": {"shared <2"}},
				"shared": {"2.0.0": nil, "1.0.0": {"target >=1,<2"}},
				"target": {"2.0.0": nil, "1.0.0": nil},
			},
			root: []string{"foo >=1,<2", "target >=2,<3"},
			want: map[string]Version{"foo": "1.0.0", "target": "2.0.0"},
		},
		{
			name: "linear error reporting",
			idx: index{
				"foo": {"1.0.0": {"bar >=2,<3"}},
				"bar": {"2.0.0": {"baz >=3,<4"}},
				"baz": {"1.0.0": nil, "3.0.0": nil},
			},
			root: []string{"foo >=1,<2", "baz >=1,<2"},
			explain: "" +
				"Because every version of foo depends on bar >=2,<3 which depends on baz >=3,<4, every version of foo requires baz >=3,<4.\n" +
				"So, because you require both foo >=1,<2 and baz >=1,<2, version solving failed.",
		},
		{
			name: "branching error reporting",
			idx: index{
				"foo": {"1.0.0": {"a >=1,<2", "b >=1,<2"}, "1.1.0": {"x >=1,<2", "y >=1,<2"}},
				"a":   {"1.0.0": {"b >=2,<3"}},
				"b":   {"1.0.0": nil, "2.0.0": nil},
				"x":   {"1.0.0": {"y >=2,<3"}},
				"y":   {"1.0.0": nil, "2.0.0": nil},
			},
			root: []string{"foo >=1,<2"},
			explain: "" +
				"    Because foo ==1.0.0 depends on a >=1,<2 which depends on b >=2,<3, foo ==1.0.0 requires b >=2,<3.\n" +
				"(1) So, because foo ==1.0.0 depends on b >=1,<2, foo ==1.0.0 is forbidden.\n" +
				"\n" +
				"    Because foo ==1.1.0 depends on x >=1,<2 which depends on y >=2,<3, foo ==1.1.0 requires y >=2,<3.\n" +
				"    And because foo ==1.1.0 depends on y >=1,<2, foo ==1.1.0 is forbidden.\n" +
				"    And because foo ==1.0.0 is forbidden (1), every version of foo is forbidden.\n" +
				"    So, because you require foo >=1,<2, version solving failed.",
		},
		{
			name: "issue: backtrack to an older version",
			idx: index{
				"a": {"2.0": nil, "1.5": nil, "1.0": nil},
				"b": {"1.0": {"a <2"}},
			},
			root: []string{"a", "b"},
			want: map[string]Version{"a": "1.5", "b": "1.0"},
		},
		{
			name: "issue: unsatisfiable",
			idx: index{
				"a": {"2.0": nil, "1.0": nil},
				"b": {"1.0": {"a <2"}, "2.0": {"a <2"}},
			},
			root: []string{"a >=2", "b"},
			explain: "" +
				"Because every version of b depends on a <2 and you require a >=2, every version of b is forbidden.\n" +
				"So, because you require b, version solving failed.",
		},
		{
			name:    "no matching version",
			idx:     index{"a": {"1.0": nil}},
			root:    []string{"a >=2"},
			explain: "Because you require a >=2 which matches no version, version solving failed.",
		},
		{
			name: "unknown package deep down",
			idx: index{
				"a": {"1.0": {"ghost"}},
			},
			root:    []string{"a"},
			explain: "Because every version of a depends on ghost which matches no version, every version of a is forbidden.\nSo, because you require a, version solving failed.",
		},
		{
			name: "extra as a virtual package pins the same version",
			idx: index{
				"a":     {"2.0": nil, "1.0": nil},
				"a[x]":  {"2.0": {"a ==2.0", "xdep"}, "1.0": {"a ==1.0"}},
				"xdep":  {"1.0": {"other <1"}},
				"other": {"1.0": nil},
			},
			root: []string{"a", "a[x]"},
			want: map[string]Version{"a": "1.0", "a[x]": "1.0"},
		},
		{
			name: "self dependency",
			idx: index{
				"a": {"2.0": {"a <2"}, "1.0": {"a ==1.0"}},
			},
			root: []string{"a"},
			want: map[string]Version{"a": "1.0"},
		},
		{
			name: "dependency cycle",
			idx: index{
				"a": {"1.0": {"b"}},
				"b": {"1.0": {"a"}},
			},
			root: []string{"a"},
			want: map[string]Version{"a": "1.0", "b": "1.0"},
		},
		{
			// A graph on which github.com/contriboss/pubgrub-go finds no
			// solution (see doc.go).
			name: "pubgrub-go counterexample",
			idx: index{
				"p0": {"3": {"p1"}, "2": {"p3", "p4 ==1"}, "1": {"p2 >=2,<=3"}},
				"p1": {"4": {"p2 ==1"}, "3": {"p0 ==3"}, "2": {"p0 ==2", "p2 >=2,<=3"}, "1": {"p3 ==5"}},
				"p2": {"5": nil, "4": nil, "3": nil, "2": nil, "1": nil},
				"p3": {"5": {"p4 ==1"}, "4": {"p4 ==1"}, "3": {"p2 >=4"}, "2": {"p4 ==1", "p1 ==4"}, "1": {"p2 ==5"}},
				"p4": {"1": {"p1 <=3", "p3 ==2"}},
			},
			root: []string{"p0 >=2", "p3"},
			want: map[string]Version{"p0": "3", "p1": "3", "p2": "5", "p3": "3"},
		},
		{
			name: "no requirements",
			idx:  index{},
			want: map[string]Version{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Solve(context.Background(), newProvider(tc.idx), mustDeps(t, tc.root...))
			if tc.want != nil {
				if err != nil {
					t.Fatalf("Solve: %v", err)
				}
				if !maps.Equal(got, tc.want) {
					t.Fatalf("Solve = %v, want %v", got, tc.want)
				}
				return
			}
			var ns *NoSolution
			if !errors.As(err, &ns) {
				t.Fatalf("Solve = %v, %v; want a *NoSolution", got, err)
			}
			if ns.Explain() != tc.explain {
				t.Errorf("explanation:\n%s\nwant:\n%s", ns.Explain(), tc.explain)
			}
			if ns.Error() != ns.Explain() {
				t.Errorf("Error() = %q, want the explanation", ns.Error())
			}
		})
	}
}
