package pubgrub

import "testing"

func TestSet(t *testing.T) {
	ge2 := NewSet(">=2", func(v Version) bool { return v >= "2" })
	not3 := NewSet("!=3", func(v Version) bool { return v != "3" })
	tests := []struct {
		set  Set
		text string
		in   []Version
		out  []Version
	}{
		{Any(), "*", []Version{"1", "3"}, nil},
		{Set{}, "*", []Version{"1"}, nil},
		{NewSet("ignored", nil), "*", []Version{"1"}, nil},
		{Exactly("2"), "==2", []Version{"2"}, []Version{"1", "3"}},
		{ge2.Intersect(not3), ">=2, !=3", []Version{"2", "4"}, []Version{"1", "3"}},
		{ge2.Intersect(Any()), ">=2", []Version{"2"}, []Version{"1"}},
		{ge2.Union(Exactly("1")), ">=2 || ==1", []Version{"1", "2"}, []Version{"0"}},
		{ge2.Union(Any()), "*", []Version{"0"}, nil},
		{ge2.Complement(), "not (>=2)", []Version{"1"}, []Version{"2"}},
		{Any().Complement(), "<none>", nil, []Version{"1"}},
	}
	for _, tc := range tests {
		if got := tc.set.String(); got != tc.text {
			t.Errorf("String() = %q, want %q", got, tc.text)
		}
		for _, v := range tc.in {
			if !tc.set.Contains(v) {
				t.Errorf("%s does not contain %s", tc.text, v)
			}
		}
		for _, v := range tc.out {
			if tc.set.Contains(v) {
				t.Errorf("%s contains %s", tc.text, v)
			}
		}
	}
}

// TestRangeText: computed sets print as ranges between listed versions.
func TestRangeText(t *testing.T) {
	versions := []Version{"3.0", "2.0", "1.1", "1.0"} // newest first
	tests := []struct {
		members []int // indexes into versions
		want    string
	}{
		{nil, "<none>"},
		{[]int{0, 1, 2, 3}, "*"},
		{[]int{2, 3}, "<2.0"},
		{[]int{0, 1}, ">=2.0"},
		{[]int{1, 2}, ">=1.1, <3.0"},
		{[]int{1}, "==2.0"},
		{[]int{0, 2, 3}, "<2.0 || ==3.0"},
	}
	for _, tc := range tests {
		s := emptyVset(len(versions))
		for _, i := range tc.members {
			s = s.with(i)
		}
		if got := rangeText(s, versions); got != tc.want {
			t.Errorf("rangeText(%v) = %q, want %q", tc.members, got, tc.want)
		}
	}
	// Past one word of bits.
	many := make([]Version, 130)
	for i := range many {
		many[i] = Version(rune('a'+i%26)) + Version(rune('a'+i/26))
	}
	full := fullVset(len(many))
	if full.count() != 130 || !full.isFull() || full.minus(full.with(129)).count() != 0 {
		t.Errorf("a 130-version universe is not handled: %d bits", full.count())
	}
	if got := full.minus(emptyVset(130).with(0)).first(); got != 1 {
		t.Errorf("first() = %d, want 1", got)
	}
}
