package backoff

import (
	"slices"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const ms = time.Millisecond
	for _, tt := range []struct {
		name     string
		min, max time.Duration
		resetAt  int // Reset before the wait of this index; -1 never
		want     []time.Duration
	}{
		{"doubles up to max", 100 * ms, 30 * time.Second, -1,
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second}},
		{"max not a power of two of min", ms, 50 * ms, -1,
			[]time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 50 * ms, 50 * ms}},
		{"reset starts again from min", 10 * ms, 100 * ms, 3,
			[]time.Duration{10 * ms, 20 * ms, 40 * ms, 10 * ms, 20 * ms}},
		{"max below min is min", 10 * ms, ms, -1,
			[]time.Duration{10 * ms, 10 * ms, 10 * ms}},
		{"min equal to max", 5 * ms, 5 * ms, -1,
			[]time.Duration{5 * ms, 5 * ms}},
		{"zero value waits 0", 0, 0, -1,
			[]time.Duration{0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := Backoff{Min: tt.min, Max: tt.max}
			var got []time.Duration
			for i := range tt.want {
				if i == tt.resetAt {
					b.Reset()
				}
				got = append(got, b.Next())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("waits %v, want %v", got, tt.want)
			}
		})
	}
}
