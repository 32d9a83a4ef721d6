package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// The API bound is the other ceiling of a cold start: how fast this control plane takes the
// writes a cold start makes, with no provider in the way. It is measured on the row's own
// control plane once the manager has stopped, in a namespace of its own: N subscriptions
// applied as the row applied them (16 at a time), and as each appears, what the manager wrote
// for each new subscription, by as many workers as the manager reconciles at once and with no
// client-side limit (the manager's default; its kubeconfig sets no QPS): the finalizer patch,
// the signing Secret read (absent) and create, the status patch, and as many Events in all as
// the manager sent during the cold start, each on a goroutine of its own as the event
// broadcaster sends them. No correct operator can make a subscription Ready with fewer writes
// than that; one with fewer writes per subscription has a lower bound, which is the point of
// measuring its writes (apiWrites) beside it.
//
// The writes are watched as the cold start's are (watchAsCold): every write to a watched
// object costs the API server an event per watcher (on this machine its CPU over a cold start
// of 2,000 subscriptions was a sixth more than over the same writes unwatched). Without the watchers the bound would be the ceiling of writes nobody
// observes, which no controller can reach: its own objects and the ones it owns are watched by
// it, and the bench watches the subscriptions to see them Ready.

// apiBoundNamespace holds the bound's objects.
const apiBoundNamespace = "api-bound"

// apiWork is what the bound replays.
type apiWork struct {
	N       int // subscriptions
	Workers int // the manager's --max-concurrent-reconciles
	Events  int // Events the manager sent during the cold start
}

// measureAPIBound replays w on the control plane cfg reaches and returns how long it took.
func measureAPIBound(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, fp fakeProvider, w apiWork) (time.Duration, error) {
	unlimited := rest.CopyConfig(cfg)
	unlimited.QPS, unlimited.Burst = -1, 0
	k8s, err := client.New(unlimited, client.Options{Scheme: scheme})
	if err != nil {
		return 0, err
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiBoundNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	stopWatching, err := watchAsCold(ctx, cfg, scheme)
	if err != nil {
		return 0, err
	}
	defer stopWatching()
	cred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apiBoundNamespace, Name: "account-0"}, StringData: map[string]string{"apiKey": fp.credential(0), "token": fp.credential(0)}}
	if err := k8s.Create(ctx, cred); err != nil {
		return 0, err
	}
	created := make(chan *hookv1.WebhookSubscription, w.N)
	var events atomic.Int64
	events.Store(int64(w.Events))
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(created)
		apply, actx := errgroup.WithContext(gctx)
		apply.SetLimit(16)
		for i := range w.N {
			apply.Go(func() error {
				sub := benchSubscription(fp, "http://unused.invalid", "https://hooks.example.com/"+subName(i), time.Minute, i, 0)
				sub.Namespace = apiBoundNamespace
				if err := k8s.Create(actx, sub); err != nil {
					return err
				}
				created <- sub
				return nil
			})
		}
		return apply.Wait()
	})
	var sent errgroup.Group // Events, as the broadcaster sends them: not waited on by the workers
	for range max(w.Workers, 1) {
		g.Go(func() error {
			for sub := range created {
				if err := newSubscriptionWrites(gctx, k8s, sub); err != nil {
					return err
				}
				if events.Add(-1) >= 0 {
					sent.Go(func() error { return k8s.Create(ctx, benchEvent(sub)) })
				}
			}
			return nil
		})
	}
	err = g.Wait()
	if serr := sent.Wait(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, fmt.Errorf("measuring the API bound: %w", err)
	}
	return time.Since(start), nil
}

// watchAsCold watches the bound's namespace as the cold start's is watched: the subscriptions
// twice (the manager's informer, the bench's tracker), the Secrets by their metadata (the
// manager's informer of the signing Secrets it owns and the credentials it uses). The watchers
// decode every event, as the manager's and the tracker's do; stop ends them.
func watchAsCold(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	secrets := &metav1.PartialObjectMetadata{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	var started sync.WaitGroup
	for _, kinds := range [][]client.Object{{&hookv1.WebhookSubscription{}, secrets}, {&hookv1.WebhookSubscription{}}} {
		c, err := crcache.New(cfg, crcache.Options{Scheme: scheme, DefaultNamespaces: map[string]crcache.Config{apiBoundNamespace: {}}})
		if err != nil {
			cancel()
			return nil, err
		}
		for _, obj := range kinds {
			if _, err := c.GetInformer(ctx, obj); err != nil {
				cancel()
				return nil, err
			}
		}
		started.Add(1)
		go func() {
			defer started.Done()
			_ = c.Start(ctx) // ends with ctx
		}()
		if !c.WaitForCacheSync(ctx) {
			cancel()
			started.Wait()
			return nil, errors.New("the API bound's watchers did not sync")
		}
	}
	return func() { cancel(); started.Wait() }, nil
}

// newSubscriptionWrites are the manager's writes for one new subscription, in its order.
func newSubscriptionWrites(ctx context.Context, k8s client.Client, sub *hookv1.WebhookSubscription) error {
	base := sub.DeepCopy()
	sub.Finalizers = append(sub.Finalizers, hookv1.Finalizer)
	if err := k8s.Patch(ctx, sub, client.MergeFrom(base)); err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: sub.Namespace, Name: sub.Spec.SigningSecret.Name}
	if err := k8s.Get(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading signing Secret %s: want NotFound, got %v", key.Name, err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels:      map[string]string{hookv1.LabelSigningSecret: "true", hookv1.LabelSubscription: sub.Name},
		Annotations: map[string]string{hookv1.AnnotationEndpointID: "we_" + sub.Name}},
		Data: map[string][]byte{hookv1.SecretKeyFor("we_" + sub.Name): []byte("whsec_bench"), hookv1.SecretKeyCurrent: []byte("whsec_bench")}}
	if err := k8s.Create(ctx, sec); err != nil {
		return err
	}
	base = sub.DeepCopy()
	now := metav1.Now()
	sub.Status.ObservedGeneration = sub.Generation
	sub.Status.EndpointID = "we_" + sub.Name
	sub.Status.URL = sub.Spec.Endpoint.URL
	sub.Status.LastSyncTime = &now
	meta.SetStatusCondition(&sub.Status.Conditions, metav1.Condition{Type: hookv1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: string(hookv1.ReasonSucceeded), Message: "registration we_" + sub.Name + " matches the spec and its signing secret is stored", ObservedGeneration: sub.Generation})
	return k8s.Status().Patch(ctx, sub, client.MergeFrom(base))
}

// benchEvent is an Event like the manager's "Created".
func benchEvent(sub *hookv1.WebhookSubscription) *eventsv1.Event {
	now := metav1.NowMicro()
	return &eventsv1.Event{
		// Named as the event recorder names them: the object's name and the time in hex.
		ObjectMeta:          metav1.ObjectMeta{Namespace: sub.Namespace, Name: fmt.Sprintf("%s.%x", sub.Name, now.UnixNano())},
		EventTime:           now,
		ReportingController: "hookwarden-manager",
		ReportingInstance:   "hookwarden-manager-bench",
		Action:              "Create",
		Reason:              string(hookv1.ReasonCreated),
		Regarding:           corev1.ObjectReference{Kind: "WebhookSubscription", APIVersion: hookv1.GroupVersion.String(), Namespace: sub.Namespace, Name: sub.Name, UID: sub.UID},
		Note:                "registered we_" + sub.Name + " for " + sub.Spec.Endpoint.URL,
		Type:                corev1.EventTypeNormal,
	}
}
