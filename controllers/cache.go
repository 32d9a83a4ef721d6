package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager's memory must not grow with what else lives in the cluster. It watches Secrets
// (its signing Secrets, and the credentials its subscriptions name) and ConfigMaps (REST
// profiles) by their metadata only, and reads their content from the API server when a
// reconcile needs it. A cache holding whole Secrets would hold every Secret of the cluster:
// a watch cannot be narrowed to the credentials, whose names only the subscriptions know,
// and controller-runtime applies a label selector per kind, so selecting the signing Secrets
// by label would also hide the credentials from the metadata watch.

// CacheOptions are the cache settings the controller is written for: managed fields stripped
// from everything, and Secrets and ConfigMaps reduced to what their watches read (name,
// namespace, labels, owner references, resource version). Annotations go too:
// `kubectl apply` keeps a copy of the whole object, data included, in
// kubectl.kubernetes.io/last-applied-configuration. namespaces, when set, limits the cache to
// them (--watch-namespace).
func CacheOptions(namespaces []string) cache.Options {
	o := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:    {Transform: stripContent},
			&corev1.ConfigMap{}: {Transform: stripContent},
		},
	}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			o.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return o
}

// ClientOptions make the manager's client read Secrets and ConfigMaps from the API server,
// never through the cache: a cached read would start an informer holding every Secret.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// stripContent keeps what the Secret and ConfigMap watches use. The watches are metadata-only,
// so the content is not there to begin with; should a typed informer ever start, it is dropped
// here too.
func stripContent(in any) (any, error) {
	switch o := in.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	}
	if m, err := meta.Accessor(in); err == nil {
		m.SetAnnotations(nil)
		m.SetManagedFields(nil)
	}
	return in, nil
}
