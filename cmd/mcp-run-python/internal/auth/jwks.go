package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"go.uber.org/zap"
)

const (
	// fetchInterval is the least time between two fetches of the keys,
	// successful or not, so that tokens naming made-up key IDs cannot make
	// the server hammer the issuer, nor every request retry an issuer that
	// is down. A key that the issuer has just rotated in is thus refused
	// for up to this long.
	fetchInterval = 10 * time.Second
	// keysMaxAge is how long fetched keys are used before they are fetched
	// again, so that a key the issuer has withdrawn stops being accepted.
	keysMaxAge = 15 * time.Minute
	// fetchTimeout bounds one discovery and JWKS fetch.
	fetchTimeout = 10 * time.Second
)

// keySet holds the issuer's signing keys (its JWKS). It discovers the
// jwks_uri and fetches the keys when they are first needed, again when a
// token names a key it does not have, and when they are older than
// keysMaxAge, each time within fetchInterval.
type keySet struct {
	issuer string
	client *http.Client
	log    *zap.Logger
	now    func() time.Time

	// fetching is held by the one goroutine that fetches, so that requests
	// arriving meanwhile wait for its result instead of fetching too.
	fetching chan struct{}
	state    atomic.Pointer[keyState]
}

// keyState is what the last fetch left; it is replaced whole, never changed.
type keyState struct {
	jwksURI   string    // from discovery; "" until it has succeeded
	set       jwk.Set   // the keys; nil until a fetch has succeeded
	fetched   time.Time // when set was fetched
	attempted time.Time // when the last fetch ended, zero if none has
	err       error     // why the last fetch failed; nil if it did not
}

func newKeySet(issuer string, client *http.Client, log *zap.Logger, now func() time.Time) *keySet {
	k := &keySet{issuer: issuer, client: client, log: log, now: now, fetching: make(chan struct{}, 1)}
	k.state.Store(&keyState{})
	return k
}

// prefetch fetches the keys within ctx, before any request wants them, and
// returns why it failed.
func (k *keySet) prefetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	prev := k.state.Load()
	next := k.fetch(ctx, prev)
	k.state.Store(next)
	if next.err != nil && !errors.Is(next.err, errNoMetadata) {
		// NewOAuth fails with errNoMetadata but lives with the others,
		// so they must be told here.
		k.logFailure(prev, next.err)
	}
	return next.err
}

// key returns the issuer's key that verifies a token signed with alg by the
// key kid ("" when the token names none).
func (k *keySet) key(ctx context.Context, kid string, alg jwa.SignatureAlgorithm) (jwk.Key, error) {
	st := k.state.Load()
	if st.set != nil && k.now().Sub(st.fetched) >= keysMaxAge {
		// Refresh on the way, but do not wait for another goroutine's
		// refresh: the keys at hand are still good enough.
		st = k.refresh(ctx, false)
	}
	key, err := find(st.set, kid, alg)
	if key != nil || err != nil {
		return key, err
	}
	// An unknown key may be one the issuer has rotated in since.
	st = k.refresh(ctx, true)
	if key, err := find(st.set, kid, alg); key != nil || err != nil {
		return key, err
	}
	switch {
	case ctx.Err() != nil:
		return nil, &Error{Kind: ErrUnavailable, Description: "request ended while the authorization server's keys were fetched", Err: ctx.Err()}
	case st.err != nil:
		return nil, &Error{Kind: ErrUnavailable, Description: "cannot fetch the authorization server's keys", Err: st.err}
	}
	return nil, invalid("no key of the authorization server's matches the token's key ID and algorithm", nil)
}

// find returns the key of set that verifies a token signed with alg by the
// key kid, or nil if there is none. A key whose alg is set must have the
// token's, so that a token cannot choose how a key is used. A token
// without kid is accepted only from an issuer with a single key for alg:
// trying every key would let one token cost many verifications.
func find(set jwk.Set, kid string, alg jwa.SignatureAlgorithm) (jwk.Key, error) {
	if set == nil {
		return nil, nil
	}
	var found []jwk.Key
	for i := range set.Len() {
		key, _ := set.Key(i)
		if id, _ := key.KeyID(); kid != "" && id != kid {
			continue
		}
		if use, ok := key.KeyUsage(); ok && use != string(jwk.ForSignature) {
			continue
		}
		if a, ok := key.Algorithm(); ok && a.String() != alg.String() {
			continue
		}
		found = append(found, key)
	}
	switch {
	case len(found) == 0:
		return nil, nil
	case kid == "" && len(found) > 1:
		return nil, invalid("token has no key ID and the authorization server has several keys", nil)
	}
	return found[0], nil
}

// refresh fetches the keys unless the last fetch ended less than
// fetchInterval ago, and returns the latest state. With wait false it does
// not wait for a fetch under way but returns the state at hand. A failed
// fetch keeps the keys there were.
func (k *keySet) refresh(ctx context.Context, wait bool) *keyState {
	select {
	case k.fetching <- struct{}{}:
	default:
		if !wait {
			return k.state.Load()
		}
		select {
		case k.fetching <- struct{}{}:
		case <-ctx.Done():
			return k.state.Load()
		}
	}
	defer func() { <-k.fetching }()

	// Requests that waited for a fetch find that it has just ended, and
	// use its result.
	cur := k.state.Load()
	if !cur.attempted.IsZero() && k.now().Sub(cur.attempted) < fetchInterval {
		return cur
	}
	// The fetch goes on if the request that started it ends, so that
	// clients that hang up cannot make the server start fetch after fetch.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	next := k.fetch(fctx, cur)
	k.state.Store(next)
	if next.err != nil {
		k.logFailure(cur, next.err)
	}
	return next
}

// fetch returns the state after a fetch from cur's; the caller logs a
// failure.
func (k *keySet) fetch(ctx context.Context, cur *keyState) *keyState {
	next := *cur
	next.err = k.fetchKeys(ctx, &next)
	// From the end of the fetch, so that a slow issuer is not asked again
	// at once.
	next.attempted = k.now()
	return &next
}

// fetchKeys discovers st's jwks_uri if it has none, and fetches st's keys
// from it.
func (k *keySet) fetchKeys(ctx context.Context, st *keyState) error {
	if st.jwksURI == "" {
		uri, err := discover(ctx, k.client, k.issuer)
		if err != nil {
			return err
		}
		st.jwksURI = uri
		k.log.Info("discovered the authorization server's keys", zap.String("issuer", k.issuer), zap.String("jwks_uri", uri))
	}
	set, err := jwk.Fetch(ctx, st.jwksURI, jwk.WithHTTPClient(k.client))
	if err != nil {
		uri := st.jwksURI
		st.jwksURI = "" // discover again next time, in case the keys have moved
		return fmt.Errorf("fetch JWKS %s: %w", uri, err)
	}
	st.set, st.fetched = set, k.now()
	k.log.Info("fetched the authorization server's keys", zap.String("jwks_uri", st.jwksURI), zap.Int("keys", set.Len()))
	return nil
}

// logFailure logs a failed fetch, saying what it means for requests.
func (k *keySet) logFailure(prev *keyState, err error) {
	msg := "cannot fetch the authorization server's keys; requests are answered 503 until it answers"
	if prev.set != nil {
		msg = "cannot refresh the authorization server's keys; using those fetched before"
	}
	lvl := zap.WarnLevel
	if errors.Is(err, errNoMetadata) {
		lvl = zap.ErrorLevel
	}
	k.log.Log(lvl, msg, zap.String("issuer", k.issuer), zap.Duration("retry_after", fetchInterval), zap.Error(err))
}
