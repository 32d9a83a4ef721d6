package receiver_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
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
