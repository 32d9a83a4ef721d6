// Package receiver is the bundled webhook receiver: it verifies each delivery with its
// provider's scheme, records it in the durable ledger (deduplicated, acknowledged only after
// the commit) and hands it to the delivery workers.
package receiver

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// Route is what the receiver knows about one subscription.
type Route struct {
	Namespace, Name string
	UID             string
	Provider        string
	// Secrets are every signing secret that may currently sign deliveries (rotation overlap).
	Secrets [][]byte
	// Verifier, when set, verifies this route's deliveries instead of the provider type's: a
	// scheme described in the signing Secret (a REST profile's).
	Verifier providers.Verifier
	// Sinks, MaxAttempts and DedupeWindow come from spec.delivery (Sinks: nil without it, and
	// its events wait until a sink is configured).
	Sinks        []deliver.Sink
	MaxAttempts  int
	DedupeWindow time.Duration
	// Retention is how long a delivered event's payload is kept (spec.delivery.retention;
	// default: DedupeWindow).
	Retention time.Duration
	// verifierSpec is the description Verifier was built from (Refresh compares it).
	verifierSpec []byte
	// sinkNames are the names of Sinks, each event's jobs (set by Routes.Set).
	sinkNames []string
	// deliverySpec is spec.delivery, sinkData the route Secret's data Sinks were built from.
	deliverySpec *hookv1.DeliverySpec
	sinkData     map[string][]byte
}

// Key is "namespace/name", the route's id and the ledger's subscription key.
func (r Route) Key() string { return r.Namespace + "/" + r.Name }

// Defaults for spec.delivery fields left empty.
const (
	DefaultMaxAttempts  = 10
	DefaultDedupeWindow = 72 * time.Hour
)

// Routes is the route table, safe for concurrent use.
type Routes struct {
	mu sync.RWMutex
	m  map[string]Route
}

// NewRoutes returns an empty table.
func NewRoutes() *Routes { return &Routes{m: map[string]Route{}} }

// Lookup returns the route of namespace/name.
func (t *Routes) Lookup(namespace, name string) (Route, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.m[namespace+"/"+name]
	return r, ok
}

// Set adds or replaces a route.
func (t *Routes) Set(r Route) {
	r.sinkNames = sinkNames(r.Sinks)
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.m[r.Key()]
	t.m[r.Key()] = r
	if ok {
		closeSinks(old.Sinks, r.Sinks)
	}
}

// closeSinks lets go of the connections of old sinks that next does not keep.
func closeSinks(old, next []deliver.Sink) {
	for _, o := range old {
		if o.HTTP != nil && !slices.ContainsFunc(next, func(n deliver.Sink) bool { return n.HTTP == o.HTTP }) {
			o.HTTP.Close()
		}
		if o.Publisher != nil && !slices.ContainsFunc(next, func(n deliver.Sink) bool { return n.Publisher == o.Publisher }) {
			o.Publisher.Close()
		}
	}
}

// Resolve is the deliver.Resolver over the table: the sink named sink of subscription
// ("namespace/name"). ok is false when the subscription has no route or no sink configured (its
// events wait); a sink the route no longer has comes back Gone.
func (t *Routes) Resolve(subscription, sink string) (deliver.Sink, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.m[subscription]
	if !ok || len(r.Sinks) == 0 {
		return deliver.Sink{}, false
	}
	for _, s := range r.Sinks {
		if s.Name == sink {
			return s, true
		}
	}
	return deliver.Sink{Name: sink, Gone: true}, true
}

// Delete removes a route.
func (t *Routes) Delete(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}

// MaxDedupeWindow is the longest dedupe window of any route (zero without routes).
func (t *Routes) MaxDedupeWindow() time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var w time.Duration
	for _, r := range t.m {
		w = max(w, r.DedupeWindow)
	}
	return w
}

// Retentions is each route's payload retention by its key, and the longest of them.
func (t *Routes) Retentions() (map[string]time.Duration, time.Duration) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m := make(map[string]time.Duration, len(t.m))
	var longest time.Duration
	for k, r := range t.m {
		m[k] = r.retention()
		longest = max(longest, m[k])
	}
	return m, longest
}

// retention is r.Retention, or its dedupe window when unset.
func (r Route) retention() time.Duration {
	if r.Retention > 0 {
		return r.Retention
	}
	return r.DedupeWindow
}

// Len counts routes.
func (t *Routes) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// RouteReconciler keeps Routes in step with WebhookSubscriptions and their route Secrets: the
// manager's copies of the signing Secrets, in the receiver's own namespace (package
// routesecret). It only reads, and reads Secrets in that one namespace only.
type RouteReconciler struct {
	// Reader is the cache: subscriptions (every watched namespace) and route Secrets
	// (Namespace only).
	client.Reader
	// APIReader reads one route Secret from the API server when a delivery fails verification
	// (Refresh): the watch may not have shown a secret the manager has just written.
	APIReader client.Reader
	// Namespace is the receiver's own namespace, where the manager writes the route Secrets.
	Namespace string
	Routes    *Routes
	// Schemes build, by provider type, the verifier a signing Secret describes
	// (hookv1.SecretKeyVerifier) for providers whose scheme is not known from the type alone.
	Schemes map[string]func(spec []byte) (providers.Verifier, error)
	// Metrics gets a series set per route (nil: none).
	Metrics *Metrics
	// SinkMetrics are the delivery metrics, whose per-sink series go with their route (nil:
	// none).
	SinkMetrics *deliver.Metrics
	// RefreshInterval is the shortest time between two reads of one route's Secret by Refresh
	// (default DefaultRefreshInterval), so forged deliveries cannot turn into API requests.
	RefreshInterval time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu        sync.Mutex
	inflight  map[string]*refreshCall
	refreshed map[string]time.Time
}

// SetupWithManager watches subscriptions and the route Secrets (the manager's cache must be
// restricted to Secrets labelled hookwarden.io/route-secret in the receiver's namespace, see
// CacheOptions).
func (r *RouteReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&hookv1.WebhookSubscription{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			src, ok := routesecret.SourceOf(o)
			if !ok || o.GetNamespace() != r.Namespace {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: src.Namespace, Name: src.Name}}}
		})).
		Named("receiver-routes").
		Complete(r)
}

// CacheOptions are the cache settings the RouteReconciler is written for: subscriptions in
// watchNamespaces (all when empty), and Secrets only in the receiver's namespace and only the
// route Secrets there. The receiver's RBAC grants Secrets in that namespace alone.
func CacheOptions(receiverNamespace string, watchNamespaces []string) cache.Options {
	o := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{receiverNamespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{routesecret.Label: "true"}),
		},
	}}
	if len(watchNamespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range watchNamespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return o
}

// Reconcile rebuilds one subscription's route.
func (r *RouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.Namespace + "/" + req.Name
	var sub hookv1.WebhookSubscription
	if err := r.Get(ctx, req.NamespacedName, &sub); err != nil {
		if apierrors.IsNotFound(err) {
			r.drop(key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !sub.DeletionTimestamp.IsZero() {
		r.drop(key)
		return ctrl.Result{}, nil
	}
	route := Route{Namespace: sub.Namespace, Name: sub.Name, UID: string(sub.UID), Provider: string(sub.Spec.Provider.Type),
		MaxAttempts: DefaultMaxAttempts, DedupeWindow: DefaultDedupeWindow}
	if d := sub.Spec.Delivery; d != nil {
		route.deliverySpec = d
		if d.MaxAttempts > 0 {
			route.MaxAttempts = int(d.MaxAttempts)
		}
		if d.DedupeWindow != nil && d.DedupeWindow.Duration > 0 {
			route.DedupeWindow = d.DedupeWindow.Duration
		}
		if d.Retention != nil && d.Retention.Duration > 0 {
			route.Retention = d.Retention.Duration
		}
	}
	var sec corev1.Secret
	err := r.Get(ctx, r.secretKey(sub.Namespace, sub.Name), &sec)
	switch {
	case apierrors.IsNotFound(err):
		// No secret yet: every delivery fails verification (401) until the manager writes it.
		r.withSecret(&route, nil)
	case err != nil:
		return ctrl.Result{}, err
	default:
		r.withSecret(&route, &sec)
	}
	r.withSinks(&route)
	r.Routes.Set(route)
	r.Metrics.addRoute(route.Namespace, route.Name, sinkNames(route.Sinks))
	return ctrl.Result{}, nil
}

// withSinks builds the route's sinks from its delivery spec and its route Secret's data, or
// keeps the current route's when neither changed: a sink's HTTP client (TLS) and compiled
// filter are made once, not on every reconcile.
func (r *RouteReconciler) withSinks(route *Route) {
	if cur, ok := r.Routes.Lookup(route.Namespace, route.Name); ok && cur.UID == route.UID &&
		equality.Semantic.DeepEqual(cur.deliverySpec, route.deliverySpec) && maps.EqualFunc(cur.sinkData, route.sinkData, bytes.Equal) {
		route.Sinks = cur.Sinks
		return
	}
	route.Sinks = buildSinks(route.deliverySpec, route.sinkData)
}

func (r *RouteReconciler) secretKey(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: routesecret.Name(namespace, name)}
}

// withSecret sets the route's secrets and described verifier from its route Secret (nil: none).
// A copy written for another subscription of the same name (another UID) counts as none.
func (r *RouteReconciler) withSecret(route *Route, sec *corev1.Secret) {
	route.Secrets, route.verifierSpec, route.sinkData = nil, nil, nil
	if sec != nil {
		if src, ok := routesecret.SourceOf(sec); ok && src.Namespace == route.Namespace && src.Name == route.Name && src.UID == route.UID {
			route.Secrets = signingSecrets(sec)
			route.verifierSpec = sec.Data[hookv1.SecretKeyVerifier]
			route.sinkData = routesecret.SinkData(sec.Data)
		}
	}
	route.Verifier = nil
	if build, ok := r.Schemes[route.Provider]; ok {
		route.Verifier = describedVerifier(build, route.verifierSpec)
	}
}

func (r *RouteReconciler) drop(key string) {
	r.Routes.Delete(key)
	if ns, name, ok := strings.Cut(key, "/"); ok {
		r.Metrics.forgetRoute(ns, name)
		r.SinkMetrics.ForgetRoute(ns, name)
	}
	r.mu.Lock()
	delete(r.refreshed, key)
	r.mu.Unlock()
}

// WaitRouted blocks until the route table holds a route for every subscription the Reader
// (the manager's cache) knows, checking every interval, or until ctx ends. Until then a
// delivery for a known subscription would be refused as unknown (404) and its queued events
// would find no sink, so the receiver starts serving and delivering only after it. It reads the
// cache afresh each time: a subscription deleted meanwhile does not hold it up.
func (r *RouteReconciler) WaitRouted(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var subs hookv1.WebhookSubscriptionList
		err := r.List(ctx, &subs)
		if err == nil && r.routesAll(subs.Items) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("listing subscriptions: %w", err)
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (r *RouteReconciler) routesAll(subs []hookv1.WebhookSubscription) bool {
	for i := range subs {
		s := &subs[i]
		if !s.DeletionTimestamp.IsZero() {
			continue // its route is being removed
		}
		if _, ok := r.Routes.Lookup(s.Namespace, s.Name); !ok {
			return false
		}
	}
	return true
}

// describedVerifier builds the verifier a signing Secret describes. Until the manager has
// written a description, or when it cannot be used, the route refuses every delivery (401),
// as it does without secrets: nothing unverified is ever recorded.
func describedVerifier(build func([]byte) (providers.Verifier, error), spec []byte) providers.Verifier {
	if len(spec) == 0 {
		return refusing("the manager has not described this route's signature scheme yet")
	}
	v, err := build(spec)
	switch {
	case err != nil:
		return refusing("the signature scheme in the signing Secret cannot be used: " + err.Error())
	case v == nil:
		return refusing("the profile declares no signature scheme, and the receiver accepts no unsigned delivery")
	}
	return v
}

// refusing is the verifier of a route that cannot verify: it refuses everything.
type refusing string

func (r refusing) Verify(providers.Delivery, [][]byte) (providers.Verified, error) {
	return providers.Verified{}, providers.VerifyError("receiver", providers.ErrBadSignature, "%s", string(r))
}

// signingSecrets returns every distinct secret in a route Secret, in a stable order: the
// current one, one per live registration, and a pending client-chosen one (the provider may
// already sign with it: GitHub pings a hook as soon as it is created).
func signingSecrets(sec *corev1.Secret) [][]byte {
	var keys []string
	for k := range sec.Data {
		if k == hookv1.SecretKeyCurrent || k == hookv1.SecretKeyPending || hookv1.IsRegistrationSecretKey(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	seen := map[string]bool{}
	var out [][]byte
	for _, k := range keys {
		if v := sec.Data[k]; len(v) > 0 && !seen[string(v)] {
			seen[string(v)] = true
			out = append(out, v)
		}
	}
	return out
}

// forgetBatch and forgetPasses bound the payloads one sweep forgets per route: a backlog of a
// larger one is worked off over the next sweeps.
const (
	forgetBatch  = 1000
	forgetPasses = 10
)

// ForgetPayloads drops the payloads that each route of retentions (route key → its retention)
// has kept past its retention, a bounded number per route (see forgetBatch).
func ForgetPayloads(ctx context.Context, l store.Ledger, retentions map[string]time.Duration, now time.Time, log logr.Logger) {
	for sub, keep := range retentions {
		total := 0
		for range forgetPasses {
			n, err := l.Forget(ctx, sub, now.Add(-keep), forgetBatch)
			total += n
			if err != nil {
				log.Error(err, "forgetting delivered payloads", "subscription", sub)
				break
			}
			if n < forgetBatch {
				break
			}
		}
		if total > 0 {
			log.Info("forgot the payloads of delivered events past their retention", "subscription", sub, "events", total, "retention", keep.String())
		}
	}
}
