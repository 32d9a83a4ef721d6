package account

import (
	"bytes"
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Credentials reads the keys subscriptions name in Secrets (their credentials) and ConfigMaps
// (their REST profiles), from the API server, once per version of the object: the
// metadata-only watches say which version is current, so a wave of reconciles on one account
// costs no read per subscription, and a rotated credential or an edited profile (a new
// version) is read again. Only the named key of an object some subscription uses is kept, as
// the provider clients keep it anyway.
type Credentials struct {
	Meta client.Reader // Secrets' and ConfigMaps' metadata (the manager's cache); nil: always read the API
	// API reads the objects themselves from the API server.
	API client.Reader

	mu sync.Mutex
	// Entries are the keys read so far (make it before use).
	Entries map[CredentialKey]CredentialEntry
}

// CredentialKey names one key of one Secret or ConfigMap.
type CredentialKey struct {
	kind   string // Secret or ConfigMap
	object types.NamespacedName
	key    string
}

// CredentialEntry is one key's value as of a version of its object.
type CredentialEntry struct {
	resourceVersion string
	value           []byte
	found           bool
}

// Read returns the trimmed value of key in the Secret (empty when the key is absent), or the
// API server's error (NotFound when the Secret is gone).
func (c *Credentials) Read(ctx context.Context, secret types.NamespacedName, key string) (string, error) {
	v, _, err := c.readKey(ctx, &corev1.Secret{}, "Secret", secret, key, func(o client.Object) ([]byte, bool) {
		v, ok := o.(*corev1.Secret).Data[key]
		return v, ok
	})
	return strings.TrimSpace(string(v)), err
}

// Profile returns key of the ConfigMap, from its data or binary data (found false when it has
// SecretKey returns key of the Secret as stored (not trimmed: certificates and keys keep their
// bytes), found false when the Secret has no such key, or the API server's error (NotFound
// when the Secret is gone). Read once per version of the Secret, as Read.
func (c *Credentials) SecretKey(ctx context.Context, secret types.NamespacedName, key string) ([]byte, bool, error) {
	return c.readKey(ctx, &corev1.Secret{}, "Secret", secret, key, func(o client.Object) ([]byte, bool) {
		v, ok := o.(*corev1.Secret).Data[key]
		return v, ok
	})
}

// neither), or the API server's error (NotFound when the ConfigMap is gone).
func (c *Credentials) Profile(ctx context.Context, configMap types.NamespacedName, key string) ([]byte, bool, error) {
	v, found, err := c.readKey(ctx, &corev1.ConfigMap{}, "ConfigMap", configMap, key, func(o client.Object) ([]byte, bool) {
		cm := o.(*corev1.ConfigMap)
		if v, ok := cm.Data[key]; ok {
			return []byte(v), true
		}
		v, ok := cm.BinaryData[key]
		return v, ok
	})
	return bytes.Clone(v), found, err
}

// readKey returns value(obj) for the current version of the object named nn of kind, read
// into obj from the API server unless that version was read before.
func (c *Credentials) readKey(ctx context.Context, obj client.Object, kind string, nn types.NamespacedName, key string, value func(client.Object) ([]byte, bool)) ([]byte, bool, error) {
	k := CredentialKey{kind, nn, key}
	if c.Meta != nil {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		if err := c.Meta.Get(ctx, nn, m); err == nil {
			c.mu.Lock()
			e, ok := c.Entries[k]
			c.mu.Unlock()
			if ok && e.resourceVersion == m.ResourceVersion {
				return e.value, e.found, nil
			}
		}
	}
	if err := c.API.Get(ctx, nn, obj); err != nil {
		if apierrors.IsNotFound(err) {
			c.mu.Lock()
			delete(c.Entries, k)
			c.mu.Unlock()
		}
		return nil, false, err
	}
	v, found := value(obj)
	c.mu.Lock()
	c.Entries[k] = CredentialEntry{resourceVersion: obj.GetResourceVersion(), value: v, found: found}
	c.mu.Unlock()
	return v, found, nil
}
