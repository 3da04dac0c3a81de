package ttlcache

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[string, int](2, time.Minute)
		c.Add("a", 1)
		time.Sleep(30 * time.Second)
		c.Add("b", 2)
		if v, ok := c.Get("a"); !ok || v != 1 {
			t.Errorf("Get(a) = %d, %v before its time", v, ok)
		}
		c.Add("c", 3) // the least recently used, b, goes
		if _, ok := c.Get("b"); ok {
			t.Error("b outlived the bound of 2 entries")
		}
		time.Sleep(31 * time.Second) // a has expired, c has not
		if _, ok := c.Get("a"); ok {
			t.Error("a outlived its ttl")
		}
		if got := c.Values(); !slices.Equal(got, []int{3}) {
			t.Errorf("Values() = %v, want [3]", got)
		}
		c.Remove("c")
		if got := c.Values(); len(got) != 0 {
			t.Errorf("Values() after Remove = %v", got)
		}
	})
}
