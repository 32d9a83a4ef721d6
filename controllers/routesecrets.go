package controllers

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/logkeys"
	"github.com/hookwarden/hookwarden/internal/routesecret"
)

// RouteSecrets keeps the receiver's copy of each subscription's signing material (a route
// Secret, package routesecret) in the receiver's namespace, so the receiver reads Secrets in
// that one namespace only. Every signing-Secret write, and the first read of each version of a
// signing Secret, goes through ensure before the reconcile acts on it: a pending client-chosen
// secret is in the copy before the provider is asked to use it (GitHub pings a hook right after
// its create). Cross-namespace owner references do not exist, so the copies are deleted here:
// when the subscription's finalizer is released (Delete and Orphan alike), and by a sweep at
// start and every Interval for copies whose subscription is gone.
//
// The manager's RBAC for this is a Role in the receiver's namespace (charts, config/rbac):
// Secrets get/list/create/update/patch/delete there, and no more.
type RouteSecrets struct {
	// Client writes and deletes the copies.
	Client client.Client
	// APIReader reads the copies and signing Secrets from the API server.
	APIReader client.Reader
	// Cache is the manager's cache: subscriptions, and Secrets by their metadata.
	Cache client.Reader
	// Namespace is the receiver's namespace (--receiver-namespace).
	Namespace string
	// Interval between sweeps; zero means DefaultRouteSweepInterval.
	Interval time.Duration
	Log      logr.Logger

	mu sync.Mutex
	// copied is, per subscription, the UID, signing Secret resourceVersion and sink material
	// digest last copied: a reconcile that reads an unchanged signing Secret costs no request.
	copied map[types.NamespacedName]string
	// sinks is the sink material each subscription's last reconcile prepared (gatherSinks).
	sinks sinkData
}

// setSinks keeps the sink material of subscription key for its route Secret writes. Nil-safe.
func (r *RouteSecrets) setSinks(key types.NamespacedName, data map[string][]byte) {
	if r != nil {
		r.sinks.set(key, data)
	}
}

// DefaultRouteSweepInterval is how often copies of deleted subscriptions are looked for.
const DefaultRouteSweepInterval = 5 * time.Minute

func copiedVersion(sub *hookv1.WebhookSubscription, sec *corev1.Secret) string {
	return string(sub.UID) + "/" + sec.ResourceVersion
}

func (r *RouteSecrets) seen(key types.NamespacedName) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.copied[key]
}

func (r *RouteSecrets) remember(key types.NamespacedName, v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.copied == nil {
		r.copied = map[types.NamespacedName]string{}
	}
	if v == "" {
		delete(r.copied, key)
		return
	}
	r.copied[key] = v
}

// ensure makes the route Secret of sub hold what signing (its signing Secret, as just read
// or written) holds, and the sink material its reconcile prepared. Nil-safe: without a receiver namespace nothing is copied.
func (r *RouteSecrets) ensure(ctx context.Context, sub *hookv1.WebhookSubscription, signing *corev1.Secret) error {
	if r == nil || signing == nil {
		return nil
	}
	key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}
	sinks := r.sinks.get(key)
	v := copiedVersion(sub, signing) + "/" + digest(sinks)
	if r.seen(key) == v {
		return nil
	}
	src := routesecret.Source{Namespace: sub.Namespace, Name: sub.Name, UID: string(sub.UID)}
	data := routesecret.Data(signing.Data)
	maps.Copy(data, sinks)
	if err := r.write(ctx, src, data); err != nil {
		return err
	}
	r.remember(key, v)
	return nil
}

// write creates or updates the route Secret of src. A conflict (the sweep, or another write of
// the same subscription) is retried on a fresh read: the content comes from the signing Secret
// the caller holds, never from the copy.
func (r *RouteSecrets) write(ctx context.Context, src routesecret.Source, data map[string][]byte) error {
	name := routesecret.Name(src.Namespace, src.Name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Secret{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, cur)
		if apierrors.IsNotFound(err) {
			err = r.Client.Create(ctx, routesecret.New(r.Namespace, src, data))
			if apierrors.IsAlreadyExists(err) {
				// Created meanwhile: retried as an update.
				return apierrors.NewConflict(corev1.Resource("secrets"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if _, ok := routesecret.SourceOf(cur); !ok {
			return decide.NewStall(hookv1.ReasonConflict, "Secret %s/%s, where the receiver's copy of this subscription's signing Secret belongs, is not a route Secret (label %s); delete or rename it", r.Namespace, name, routesecret.Label)
		}
		want := cur.DeepCopy()
		routesecret.Fill(want, src, data)
		if equality.Semantic.DeepEqual(cur, want) {
			return nil
		}
		return r.Client.Update(ctx, want) // carries cur's resourceVersion: optimistic lock
	})
	if err != nil {
		return fmt.Errorf("writing the receiver's route Secret %s/%s: %w", r.Namespace, name, err)
	}
	return nil
}

// remove deletes the route Secret of namespace/name when it is one and was written for uid
// (any uid when uid is empty). Nil-safe.
func (r *RouteSecrets) remove(ctx context.Context, namespace, name, uid string) error {
	if r == nil {
		return nil
	}
	r.remember(types.NamespacedName{Namespace: namespace, Name: name}, "")
	cur := &metav1.PartialObjectMetadata{}
	cur.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	key := types.NamespacedName{Namespace: r.Namespace, Name: routesecret.Name(namespace, name)}
	if err := r.APIReader.Get(ctx, key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	src, ok := routesecret.SourceOf(cur)
	if !ok || src.Namespace != namespace || src.Name != name || (uid != "" && src.UID != uid) {
		return nil // not ours to delete
	}
	// Preconditions: a copy rewritten since it was read (a new subscription of the same name)
	// is not deleted.
	err := r.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting the receiver's route Secret %s: %w", key, err)
	}
	return nil
}

// NeedLeaderElection: only the leader writes, as only it reconciles.
func (r *RouteSecrets) NeedLeaderElection() bool { return true }

// Start sweeps at once, then every Interval, until ctx ends (a manager.Runnable).
func (r *RouteSecrets) Start(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultRouteSweepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "sweeping the receiver's route Secrets", "namespace", r.Namespace)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep deletes route Secrets whose subscription is gone (or was replaced by another of the
// same name), and copies the signing Secret of every subscription that has one but no route
// Secret (a manager upgraded from a release without copies, a copy deleted by hand).
func (r *RouteSecrets) Sweep(ctx context.Context) error {
	var copies metav1.PartialObjectMetadataList
	copies.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.APIReader.List(ctx, &copies, client.InNamespace(r.Namespace), client.MatchingLabels{routesecret.Label: "true"}); err != nil {
		return fmt.Errorf("listing route Secrets in %s: %w", r.Namespace, err)
	}
	var subs hookv1.WebhookSubscriptionList
	if err := r.Cache.List(ctx, &subs); err != nil {
		return fmt.Errorf("listing subscriptions: %w", err)
	}
	live := make(map[types.NamespacedName]*hookv1.WebhookSubscription, len(subs.Items))
	for i := range subs.Items {
		s := &subs.Items[i]
		live[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
	}
	has := map[types.NamespacedName]bool{}
	for i := range copies.Items {
		c := &copies.Items[i]
		src, ok := routesecret.SourceOf(c)
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: src.Namespace, Name: src.Name}
		if s := live[key]; s != nil && string(s.UID) == src.UID {
			has[key] = true
			continue
		}
		if err := r.remove(ctx, src.Namespace, src.Name, src.UID); err != nil {
			return err
		}
		r.Log.Info("deleted a route Secret whose subscription is gone", logkeys.Subscription, key.String(), "secret", c.Name)
	}
	for key, s := range live {
		if has[key] || !s.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.copyMissing(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// copyMissing writes the route Secret of a subscription whose signing Secret exists (as the
// metadata cache sees it, so a subscription without one costs no request).
func (r *RouteSecrets) copyMissing(ctx context.Context, sub *hookv1.WebhookSubscription) error {
	if sub.Spec.SigningSecret.Name == "" {
		return nil
	}
	key := types.NamespacedName{Namespace: sub.Namespace, Name: sub.Spec.SigningSecret.Name}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Cache.Get(ctx, key, m); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(m, sub) {
		return nil
	}
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, sec); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(sec, sub) {
		return nil
	}
	r.remember(types.NamespacedName{Namespace: sub.Namespace, Name: sub.Name}, "")
	if err := r.ensure(ctx, sub, sec); err != nil {
		return err
	}
	r.Log.Info("copied a signing Secret the receiver had no route Secret for", logkeys.Subscription, sub.Namespace+"/"+sub.Name)
	return nil
}
