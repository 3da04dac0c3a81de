package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/httprc/v3/errsink"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"go.uber.org/zap"
)

const (
	// fetchInterval is the least time between two fetches of the keys that
	// requests ask for, successful or not, so that tokens naming made-up
	// key IDs cannot make the server hammer the issuer, nor every request
	// retry an issuer that is down. A key that the issuer has just rotated
	// in is thus refused for up to this long.
	fetchInterval = 10 * time.Second
	// keysMaxAge is how long fetched keys are used before they are fetched
	// again, so that a key the issuer has withdrawn stops being accepted.
	keysMaxAge = 15 * time.Minute
	// fetchTimeout bounds one discovery and JWKS fetch.
	fetchTimeout = 10 * time.Second
	// maxKeysSize bounds the JWKS document, a few kilobytes, as
	// maxMetadataSize bounds the metadata.
	maxKeysSize = 1 << 20
)

// keySet holds the issuer's signing keys (its JWKS) in a jwk.Cache, which
// fetches them again every keysMaxAge in the background. What jwk.Cache
// does not do is kept here, as small as it can be:
//
//   - it fetches a URL it is given: the jwks_uri comes from the issuer's
//     metadata (discover), and is looked up again after a failed fetch, in
//     case the keys have moved;
//   - its Refresh fetches on every call: a token naming a key the set does
//     not have refreshes here, at most once within fetchInterval,
//     successful or not, and requests arriving meanwhile wait for that one
//     fetch instead of fetching too;
//   - its first fetch of a URL tells a failure only to its error sink:
//     register waits for that fetch, so that NewOAuth and requests learn
//     at once why there are no keys;
//   - after a failed background refresh it tries again only after
//     keysMaxAge: the keys are marked stale, and requests refresh them here
//     as they would for an unknown key.
type keySet struct {
	issuer string
	client *http.Client
	log    *zap.Logger
	now    func() time.Time
	cache  *jwk.Cache

	// fetching is held by the one goroutine that fetches, so that requests
	// arriving meanwhile wait for its result instead of fetching too.
	fetching chan struct{}
	state    atomic.Pointer[keyState]
	// stale is set when a background refresh has failed, and cleared by
	// the next fetch that succeeds.
	stale atomic.Bool
	// failed gets the cache's background failures, for register.
	failed chan error
}

// keyState is what the last fetch left; it is replaced whole, never changed.
type keyState struct {
	jwksURI   string                        // registered with the cache; "" until a discovery and first fetch have succeeded
	keys      *httprc.ResourceBase[jwk.Set] // the cache's resource of the last jwks_uri fetched; nil until a fetch has succeeded
	attempted time.Time                     // when the last fetch ended, zero if none has
	err       error                         // why the last fetch failed; nil if it did not
}

// set returns the keys at hand, nil if there are none. A set is never
// changed: the cache replaces it whole.
func (st *keyState) set() jwk.Set {
	if st.keys == nil {
		return nil
	}
	return st.keys.Resource()
}

// newKeySet returns the key set of issuer, whose cache fetches in the
// background until ctx ends.
func newKeySet(ctx context.Context, issuer string, client *http.Client, log *zap.Logger, now func() time.Time) (*keySet, error) {
	k := &keySet{issuer: issuer, client: client, log: log, now: now, fetching: make(chan struct{}, 1), failed: make(chan error, 1)}
	k.state.Store(&keyState{})
	// One worker: the cache holds one URL at a time.
	cache, err := jwk.NewCache(ctx, httprc.NewClient(httprc.WithWorkers(1), httprc.WithErrorSink(errsink.NewFunc(k.backgroundFailed))))
	if err != nil {
		return nil, fmt.Errorf("start the key cache: %w", err)
	}
	k.cache = cache
	return k, nil
}

// close stops the cache's goroutines.
func (k *keySet) close() {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	_ = k.cache.Shutdown(ctx)
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
	if k.stale.Load() {
		// Refresh on the way, but do not wait for another goroutine's
		// refresh: the keys at hand are still good enough.
		st = k.refresh(ctx, false)
	}
	key, err := find(st.set(), kid, alg)
	if key != nil || err != nil {
		return key, err
	}
	// An unknown key may be one the issuer has rotated in since.
	st = k.refresh(ctx, true)
	if key, err := find(st.set(), kid, alg); key != nil || err != nil {
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
	if next.err == nil {
		k.stale.Store(false)
	}
	// From the end of the fetch, so that a slow issuer is not asked again
	// at once.
	next.attempted = k.now()
	return &next
}

// fetchKeys discovers st's jwks_uri and registers it with the cache if st
// has none, or has the cache fetch it again.
func (k *keySet) fetchKeys(ctx context.Context, st *keyState) error {
	if st.jwksURI == "" {
		uri, err := discover(ctx, k.client, k.issuer)
		if err != nil {
			return err
		}
		k.log.Info("discovered the authorization server's keys", zap.String("issuer", k.issuer), zap.String("jwks_uri", uri))
		keys, err := k.register(ctx, uri)
		if err != nil {
			return fmt.Errorf("fetch JWKS %s: %w", uri, err)
		}
		st.jwksURI, st.keys = uri, keys
	} else if _, err := k.cache.Refresh(ctx, st.jwksURI); err != nil {
		uri := st.jwksURI
		k.unregister(uri)
		st.jwksURI = "" // discover again next time, in case the keys have moved
		return fmt.Errorf("fetch JWKS %s: %w", uri, err)
	}
	k.log.Info("fetched the authorization server's keys", zap.String("jwks_uri", st.jwksURI), zap.Int("keys", st.set().Len()))
	return nil
}

// register adds uri to the cache, which fetches it at once, and returns its
// resource once that fetch has succeeded, or why it failed: the cache
// tells a failure only to its error sink (backgroundFailed), which passes
// it on through k.failed.
func (k *keySet) register(ctx context.Context, uri string) (*httprc.ResourceBase[jwk.Set], error) {
	select {
	case <-k.failed: // of a URL registered before
	default:
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	registered := make(chan struct{})
	defer close(registered)
	go func() {
		select {
		case err := <-k.failed:
			cancel(err)
		case <-registered:
		}
	}()
	err := k.cache.Register(ctx, uri,
		jwk.WithHTTPClient(k.client),
		jwk.WithMaxFetchBodySize(maxKeysSize),
		jwk.WithHttprcResourceOption(httprc.WithConstantInterval(keysMaxAge)),
		// After a failed request the cache tries again after this long;
		// requests do meanwhile (stale).
		jwk.WithHttprcResourceOption(httprc.WithMinInterval(keysMaxAge)),
		jwk.WithWaitReady(true))
	if err != nil {
		// The URL stays registered when its first fetch fails.
		k.unregister(uri)
		if cause := context.Cause(ctx); cause != nil {
			return nil, cause
		}
		return nil, err
	}
	keys, err := k.cache.LookupResource(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("key cache: %w", err)
	}
	return keys, nil
}

// unregister removes uri from the cache, so that it fetches it no more.
func (k *keySet) unregister(uri string) {
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	_ = k.cache.Unregister(ctx, uri)
}

// backgroundFailed is the cache's error sink: a fetch that no request
// asked for has failed. That is register's first fetch, which it waits
// for, or a refresh after keysMaxAge, after which the keys are stale.
func (k *keySet) backgroundFailed(_ context.Context, err error) {
	select {
	case k.failed <- err:
	default:
	}
	st := k.state.Load()
	if st.jwksURI == "" {
		return // a first fetch: register reports it
	}
	k.stale.Store(true)
	k.log.Warn("cannot refresh the authorization server's keys; using those fetched before, and fetching them again when tokens come",
		zap.String("issuer", k.issuer), zap.Duration("retry_after", fetchInterval), zap.Error(err))
}

// logFailure logs a failed fetch, saying what it means for requests.
func (k *keySet) logFailure(prev *keyState, err error) {
	msg := "cannot fetch the authorization server's keys; requests are answered 503 until it answers"
	if prev.keys != nil {
		msg = "cannot refresh the authorization server's keys; using those fetched before"
	}
	lvl := zap.WarnLevel
	if errors.Is(err, errNoMetadata) {
		lvl = zap.ErrorLevel
	}
	k.log.Log(lvl, msg, zap.String("issuer", k.issuer), zap.Duration("retry_after", fetchInterval), zap.Error(err))
}
