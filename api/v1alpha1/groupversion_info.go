// Package v1alpha1 contains the hookwarden.io/v1alpha1 API: WebhookSubscription.
// +kubebuilder:object:generate=true
// +groupName=hookwarden.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is group version used to register these objects.
var GroupVersion = schema.GroupVersion{Group: "hookwarden.io", Version: "v1alpha1"}

// AddToScheme adds the types in this group-version to the given scheme. It is a plain function
// (no init-time registration): main and the tests build their scheme explicitly.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WebhookSubscription{}, &WebhookSubscriptionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
