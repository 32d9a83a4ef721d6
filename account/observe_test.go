package account_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

func TestPendingRotationConfirmedAgainstTheAPIServer(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := hookv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cached := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders",
		Annotations: map[string]string{hookv1.AnnotationRotateRequestedAt: "1700000000"}}}
	live := cached.DeepCopy()
	live.Status.LastHandledRotateAt = "1700000000" // written by the reconcile that rotated
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(live).WithStatusSubresource(live).Build()
	o := &account.Observer{API: api}
	got, err := o.PendingRotation(context.Background(), cached.DeepCopy(), false)
	if err != nil || got != "" {
		t.Errorf("PendingRotation = %q, %v; want none: the API server says the request was handled, only the cache lags (a second rotation would replace the new registration)", got, err)
	}
	live.Status.LastHandledRotateAt = "1600000000"
	if err := api.Status().Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	if got, err := o.PendingRotation(context.Background(), cached.DeepCopy(), false); err != nil || got != "1700000000" {
		t.Errorf("PendingRotation = %q, %v; want the request, not yet handled on the API server", got, err)
	}
}
