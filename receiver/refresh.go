package receiver

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hookwarden/hookwarden/providers"
)

// Refresher gives a route as the API server holds it now, when a delivery for it fails
// verification: the manager writes a client-chosen secret before asking the provider to use it,
// but the receiver's watch may show it only after the provider's first delivery (GitHub pings
// a hook right after its create). ok is false when nothing newer was read.
type Refresher interface {
	Refresh(ctx context.Context, route Route) (fresh Route, ok bool)
}

// DefaultRefreshInterval bounds the reads of one route's Secret: at most one per interval,
// whatever the number of failing deliveries (forged ones cost no API request beyond that).
const DefaultRefreshInterval = time.Second

// refreshTimeout bounds the read, which happens while the provider waits for its answer.
const refreshTimeout = 2 * time.Second

// verify verifies d for route; when no secret matches, it verifies once more with the route as
// the Refresher reads it, if that differs.
func (h *Handler) verify(ctx context.Context, route Route, verifier providers.Verifier, d providers.Delivery) (providers.Verified, error) {
	v, err := verifier.Verify(d, route.Secrets)
	if err == nil || h.Refresher == nil || !errors.Is(err, providers.ErrBadSignature) {
		return v, err
	}
	fresh, ok := h.Refresher.Refresh(ctx, route)
	if !ok {
		return v, err
	}
	if fresh.Verifier == nil {
		fresh.Verifier = verifier // the provider type's
	}
	return fresh.Verifier.Verify(d, fresh.Secrets)
}

type refreshCall struct {
	done  chan struct{}
	route Route
	ok    bool
}

// Refresh reads route's Secret from the API server (not the cache) and, when it holds other
// secrets or another scheme than route, updates the table and returns the new route.
// Concurrent calls for one route share one read; after a read, calls within RefreshInterval
// read nothing.
func (r *RouteReconciler) Refresh(ctx context.Context, route Route) (Route, bool) {
	if r.APIReader == nil {
		return route, false
	}
	key := route.Key()
	now := r.now()
	r.mu.Lock()
	if c := r.inflight[key]; c != nil {
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.route, c.ok
		case <-ctx.Done():
			return route, false
		}
	}
	interval := r.RefreshInterval
	if interval <= 0 {
		interval = DefaultRefreshInterval
	}
	if last, ok := r.refreshed[key]; ok && now.Sub(last) < interval {
		r.mu.Unlock()
		return route, false
	}
	if r.inflight == nil {
		r.inflight, r.refreshed = map[string]*refreshCall{}, map[string]time.Time{}
	}
	c := &refreshCall{done: make(chan struct{})}
	r.inflight[key] = c
	r.refreshed[key] = now
	r.mu.Unlock()

	c.route, c.ok = r.reread(ctx, route)
	r.mu.Lock()
	delete(r.inflight, key)
	r.mu.Unlock()
	close(c.done)
	return c.route, c.ok
}

func (r *RouteReconciler) reread(ctx context.Context, route Route) (Route, bool) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	var sec corev1.Secret
	if err := r.APIReader.Get(ctx, r.secretKey(route.Namespace, route.Name), &sec); err != nil {
		return route, false
	}
	fresh := route
	r.withSecret(&fresh, &sec)
	if sameSecrets(fresh.Secrets, route.Secrets) && bytes.Equal(fresh.verifierSpec, route.verifierSpec) {
		return route, false
	}
	// Only a route still in the table is updated: a subscription deleted meanwhile stays gone.
	if cur, ok := r.Routes.Lookup(route.Namespace, route.Name); !ok || cur.UID != route.UID {
		return route, false
	}
	r.Routes.Set(fresh)
	return fresh, true
}

func sameSecrets(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

func (r *RouteReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
