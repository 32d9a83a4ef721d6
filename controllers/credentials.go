package controllers

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// credentials reads the credential keys subscriptions name, from the API server, once per
// version of their Secret: the metadata-only watch of Secrets says which version is current,
// so a wave of reconciles on one account costs no Secret read per subscription, and a rotated
// credential (a new version) is read again. Only the named key of a Secret some subscription
// uses is kept, as the provider clients keep it anyway.
type credentials struct {
	meta client.Reader // Secrets' metadata (the manager's cache); nil: always read the API
	api  client.Reader

	mu sync.Mutex
	m  map[credentialKey]credentialEntry
}

type credentialKey struct {
	secret types.NamespacedName
	key    string
}

type credentialEntry struct {
	resourceVersion string
	value           string
}

// read returns the trimmed value of key in the Secret (empty when the key is absent), or the
// API server's error (NotFound when the Secret is gone).
func (c *credentials) read(ctx context.Context, secret types.NamespacedName, key string) (string, error) {
	k := credentialKey{secret, key}
	if c.meta != nil {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := c.meta.Get(ctx, secret, m); err == nil {
			c.mu.Lock()
			e, ok := c.m[k]
			c.mu.Unlock()
			if ok && e.resourceVersion == m.ResourceVersion {
				return e.value, nil
			}
		}
	}
	var sec corev1.Secret
	if err := c.api.Get(ctx, secret, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			c.mu.Lock()
			delete(c.m, k)
			c.mu.Unlock()
		}
		return "", err
	}
	v := strings.TrimSpace(string(sec.Data[key]))
	c.mu.Lock()
	c.m[k] = credentialEntry{resourceVersion: sec.ResourceVersion, value: v}
	c.mu.Unlock()
	return v, nil
}
