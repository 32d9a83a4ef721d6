package receiver_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/receiver"
)

// WaitRouted holds the receiver back until every subscription it can see has a route, so a
// freshly started receiver never answers 404 for a subscription it simply has not processed yet.
func TestWaitRoutedWaitsForEverySubscription(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := hookv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	deleting := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "old",
		DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{"hookwarden.io/registration"}}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}},
		&hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "refunds"}},
		deleting,
	).Build()
	routes := receiver.NewRoutes()
	r := &receiver.RouteReconciler{Reader: reader, Routes: routes}

	// Not every subscription has its route yet: WaitRouted gives up with ctx.
	routes.Set(receiver.Route{Namespace: "shop", Name: "orders"})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.WaitRouted(ctx, 10*time.Millisecond); err == nil {
		t.Fatal("WaitRouted returned before shop/refunds had a route")
	}

	// The last one arrives while it waits; the subscription being deleted never gets one.
	done := make(chan error, 1)
	go func() { done <- r.WaitRouted(context.Background(), 10*time.Millisecond) }()
	select {
	case err := <-done:
		t.Fatalf("WaitRouted returned %v before shop/refunds had a route", err)
	case <-time.After(50 * time.Millisecond):
	}
	routes.Set(receiver.Route{Namespace: "shop", Name: "refunds"})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitRouted did not return once every live subscription had a route")
	}
}

// A route's secrets come from its route Secret in the receiver's namespace only, and only when
// that copy was written for this very subscription (its UID): a copy left by an earlier
// subscription of the same name, or a signing Secret beside the subscription, verifies nothing.
func TestRouteSecretsComeFromTheReceiversNamespace(t *testing.T) {
	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid-2"},
		Spec: hookv1.WebhookSubscriptionSpec{Provider: hookv1.ProviderSpec{Type: hookv1.ProviderStripe}, SigningSecret: hookv1.SigningSecretSpec{Name: "orders-signing"}}}
	data := map[string][]byte{hookv1.SecretKeyCurrent: []byte("s")}
	signing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-signing", Labels: map[string]string{hookv1.LabelSigningSecret: "true"}}, Data: data}
	cases := []struct {
		reason  string
		objects []client.Object
		want    int
	}{
		{"the copy for this subscription", []client.Object{routesecret.New("hookwarden-system", routesecret.Source{Namespace: "shop", Name: "orders", UID: "uid-2"}, data)}, 1},
		{"a copy for an earlier subscription of the same name", []client.Object{routesecret.New("hookwarden-system", routesecret.Source{Namespace: "shop", Name: "orders", UID: "uid-1"}, data)}, 0},
		{"the copy in another namespace", []client.Object{routesecret.New("elsewhere", routesecret.Source{Namespace: "shop", Name: "orders", UID: "uid-2"}, data)}, 0},
		{"only the signing Secret beside the subscription", []client.Object{signing}, 0},
	}
	for _, c := range cases {
		routes := receiver.NewRoutes()
		r := &receiver.RouteReconciler{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(c.objects, sub.DeepCopy())...).Build(),
			Routes: routes, Namespace: "hookwarden-system"}
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}); err != nil {
			t.Fatal(err)
		}
		route, ok := routes.Lookup("shop", "orders")
		if !ok || len(route.Secrets) != c.want {
			t.Errorf("%s: route %v with %d secrets, want %d", c.reason, ok, len(route.Secrets), c.want)
		}
	}
}

// Issue 31: a route keeps delivered payloads for spec.delivery.retention, or its dedupe window
// without one; Retentions gives each route's and the longest, which the sweeper keeps rows for.
func TestRouteRetention(t *testing.T) {
	sink := &hookv1.SinkSpec{URL: "http://sink.invalid/"}
	cases := []struct {
		reason   string
		delivery *hookv1.DeliverySpec
		want     time.Duration
	}{
		{"no delivery spec: the default dedupe window", nil, receiver.DefaultDedupeWindow},
		{"no retention: the route's dedupe window", &hookv1.DeliverySpec{Sink: sink, DedupeWindow: &metav1.Duration{Duration: 2 * time.Hour}}, 2 * time.Hour},
		{"a retention longer than the dedupe window", &hookv1.DeliverySpec{Sink: sink, DedupeWindow: &metav1.Duration{Duration: 2 * time.Hour}, Retention: &metav1.Duration{Duration: 720 * time.Hour}}, 720 * time.Hour},
		{"a retention shorter than the dedupe window", &hookv1.DeliverySpec{Sink: sink, Retention: &metav1.Duration{Duration: time.Hour}}, time.Hour},
	}
	for _, c := range cases {
		sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid"},
			Spec: hookv1.WebhookSubscriptionSpec{Provider: hookv1.ProviderSpec{Type: hookv1.ProviderStripe}, Delivery: c.delivery}}
		routes := receiver.NewRoutes()
		routes.Set(receiver.Route{Namespace: "shop", Name: "other", DedupeWindow: time.Minute})
		r := &receiver.RouteReconciler{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(sub).Build(), Routes: routes, Namespace: "hookwarden-system"}
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "orders"}}); err != nil {
			t.Fatal(err)
		}
		each, longest := routes.Retentions()
		if each["shop/orders"] != c.want || each["shop/other"] != time.Minute || longest != c.want {
			t.Errorf("%s: retentions %v, longest %s; want shop/orders %s", c.reason, each, longest, c.want)
		}
	}
}
