// Package ttlcache is a bounded LRU cache whose entries expire.
package ttlcache

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache is a bounded LRU cache whose entries expire ttl after they were
// added. golang-lru's own expirable.LRU (v2.0.7) removes them from a
// goroutine that nothing can stop, which would outlive whatever owns the
// cache; here an expired entry is dropped when it is read.
type Cache[K comparable, V any] struct {
	c   *lru.Cache[K, stamped[V]]
	ttl time.Duration
}

type stamped[V any] struct {
	v  V
	at time.Time
}

// New makes a cache of at most size entries (size > 0).
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	c, err := lru.New[K, stamped[V]](size)
	if err != nil {
		panic(err) // only for size <= 0, a constant of the callers
	}
	return &Cache[K, V]{c: c, ttl: ttl}
}

// Add adds or replaces the value of k; it expires ttl from now.
func (t *Cache[K, V]) Add(k K, v V) { t.c.Add(k, stamped[V]{v, time.Now()}) }

// Get returns the value of k unless it has expired, and marks it used.
func (t *Cache[K, V]) Get(k K) (V, bool) {
	s, ok := t.c.Get(k)
	if ok && time.Since(s.at) < t.ttl {
		return s.v, true
	}
	if ok {
		t.c.Remove(k)
	}
	var zero V
	return zero, false
}

// Peek returns the value of k unless it has expired, without marking it
// used.
func (t *Cache[K, V]) Peek(k K) (V, bool) {
	if s, ok := t.c.Peek(k); ok && time.Since(s.at) < t.ttl {
		return s.v, true
	}
	var zero V
	return zero, false
}

// Remove drops k.
func (t *Cache[K, V]) Remove(k K) { t.c.Remove(k) }

// Values returns the values that have not expired, oldest used first.
func (t *Cache[K, V]) Values() []V {
	var vs []V
	for _, k := range t.c.Keys() {
		if s, ok := t.c.Peek(k); ok && time.Since(s.at) < t.ttl {
			vs = append(vs, s.v)
		}
	}
	return vs
}
