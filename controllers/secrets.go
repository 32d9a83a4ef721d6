package controllers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
)

// signingSecret reads the signing Secret (nil when it does not exist yet) from the API server,
// unless the version the metadata watch shows is the one this manager last read or wrote
// (signingMemo): a resync wave then costs no read per subscription. Never from the cache
// alone: it may not have seen a Secret written moments ago, and acting on that stale view would
// look like a lost secret, try to create it twice or drop a key. A Secret this subscription
// does not control is a conflict.
func (r *Reconciler) signingSecret(ctx context.Context, sub *hookv1.WebhookSubscription) (*corev1.Secret, error) {
	key := account.SigningSecretKey(sub)
	sec := r.signingMemo.lookup(ctx, key)
	if sec == nil {
		fresh, err := account.ReadSigningSecret(ctx, r.APIReader, sub)
		if err != nil || fresh == nil {
			r.signingMemo.forget(key)
			return nil, err
		}
		sec = fresh
		r.signingMemo.remember(sec)
	} else if err := account.CheckSigningSecret(sec, sub); err != nil {
		return nil, err
	}
	// The receiver's copy follows each version read, before anything is acted on.
	if err := r.RouteSecrets.ensure(ctx, sub, sec); err != nil {
		return nil, err
	}
	return sec, nil
}

// signingMemo keeps each signing Secret as this manager last read or wrote it, and hands it
// out while the metadata watch (the manager's cache: versions, no content) shows that same
// version. A version the watch has not caught up with, or one someone else wrote, is read from
// the API server again; a write that started from a copy someone has changed since fails its
// optimistic lock. A nil memo remembers nothing.
type signingMemo struct {
	meta client.Reader

	mu sync.Mutex
	m  map[types.NamespacedName]*corev1.Secret
}

func newSigningMemo(meta client.Reader) *signingMemo {
	return &signingMemo{meta: meta, m: map[types.NamespacedName]*corev1.Secret{}}
}

// lookup returns a copy of the Secret key as last read or written, when the watch shows its
// version still; nil otherwise.
func (m *signingMemo) lookup(ctx context.Context, key types.NamespacedName) *corev1.Secret {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	sec, ok := m.m[key]
	m.mu.Unlock()
	if !ok {
		return nil
	}
	current := &metav1.PartialObjectMetadata{}
	current.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := m.meta.Get(ctx, key, current); err != nil || current.ResourceVersion != sec.ResourceVersion {
		return nil
	}
	return sec.DeepCopy()
}

// remember keeps sec as the API server answered it (without its managed fields).
func (m *signingMemo) remember(sec *corev1.Secret) {
	if m == nil {
		return
	}
	kept := sec.DeepCopy()
	kept.ManagedFields = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[client.ObjectKeyFromObject(sec)] = kept
}

// forget drops what is kept of the Secret key.
func (m *signingMemo) forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}

// ImportedSecretWait is how long, from its creation, a subscription `hookwarden import --secret`
// wrote (annotations hookwarden.io/imported-from and hookwarden.io/imported-secret) waits for
// the signing Secret written beside it before it gets its registration a new secret: applied in
// one `kubectl apply`, the subscription may reach the manager before the Secret holding the
// secret the user supplied, and a rotation then would make a new registration (Stripe) or set a
// new secret (GitHub) for nothing.
const ImportedSecretWait = 30 * time.Second

// awaitsImportedSecret reports how long to wait for the signing Secret import wrote beside sub
// before p is carried out: p gets the imported registration a secret anew, that Secret does not
// exist yet, and sub is younger than ImportedSecretWait (age).
func awaitsImportedSecret(p decide.Plan, sub *hookv1.WebhookSubscription, secretExists bool, age time.Duration) (time.Duration, bool) {
	from := sub.Annotations[hookv1.AnnotationImportedFrom]
	if from == "" || sub.Annotations[hookv1.AnnotationImportedSecret] != sub.Spec.SigningSecret.Name || secretExists ||
		age >= ImportedSecretWait || p.Keep == nil || p.Keep.ID != from || !p.RecoversSecret() {
		return 0, false
	}
	return ImportedSecretWait - age, true
}

// importedSecretFor maps a signing Secret nobody owns yet (one `hookwarden import` wrote) to the
// subscription its label names.
func importedSecretFor(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[hookv1.LabelSigningSecret] != "true" || l[hookv1.LabelSubscription] == "" || len(o.GetOwnerReferences()) > 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[hookv1.LabelSubscription]}}}
}

// readSigningState reads the signing Secret (uncached) into an account.SigningState.
func (r *Reconciler) readSigningState(ctx context.Context, sub *hookv1.WebhookSubscription) (account.SigningState, error) {
	sec, err := r.signingSecret(ctx, sub)
	if err != nil {
		return account.SigningState{Secrets: map[string][]byte{}}, err
	}
	return account.ParseSigningState(sec, sub), nil
}

// writeSigningSecret creates or updates the signing Secret with fn applied to known, the Secret
// as the API server last answered it (nil: absent), and returns it as written. It reads
// nothing: a Secret created or changed by someone else since known was read makes the create
// (AlreadyExists) or the patch (its resourceVersion) fail, and the reconcile retry.
func (r *Reconciler) writeSigningSecret(ctx context.Context, sub *hookv1.WebhookSubscription, known *corev1.Secret, fn func(sec *corev1.Secret)) (*corev1.Secret, error) {
	sec, base, err := r.signingSecretWith(sub, known, fn)
	if err != nil {
		return nil, err
	}
	if known != nil && equality.Semantic.DeepEqual(base, sec) {
		return known, nil
	}
	key := client.ObjectKeyFromObject(sec)
	r.ownWrites.begin(key)
	if known == nil {
		err = r.Create(ctx, sec)
	} else {
		err = r.Patch(ctx, sec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}
	if err != nil {
		r.ownWrites.end(sub, key, nil)
		return nil, fmt.Errorf("writing signing Secret %s: %w", sec.Name, err)
	}
	r.ownWrites.end(sub, key, sec)
	r.signingMemo.remember(sec)
	// In the same step, the receiver's copy: a pending secret is there before the provider hears of it.
	return sec, r.RouteSecrets.ensure(ctx, sub, sec)
}

// signingSecretWith is known (nil: a new Secret) with fn applied, and the labels, type and
// controller reference every signing Secret carries; base is known as it was (a copy).
func (r *Reconciler) signingSecretWith(sub *hookv1.WebhookSubscription, known *corev1.Secret, fn func(sec *corev1.Secret)) (sec, base *corev1.Secret, err error) {
	if known != nil {
		sec = known.DeepCopy()
	} else {
		key := account.SigningSecretKey(sub)
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	}
	base = sec.DeepCopy()
	if sec.Labels == nil {
		sec.Labels = map[string]string{}
	}
	sec.Labels[hookv1.LabelSigningSecret] = "true"
	sec.Labels[hookv1.LabelSubscription] = sub.Name
	sec.Type = corev1.SecretTypeOpaque
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	fn(sec)
	if err := controllerutil.SetControllerReference(sub, sec, r.Scheme()); err != nil {
		return nil, nil, err
	}
	return sec, base, nil
}

func setCurrent(sec *corev1.Secret, id string) {
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[hookv1.AnnotationEndpointID] = id
	if v, ok := sec.Data[hookv1.SecretKeyFor(id)]; ok {
		sec.Data[hookv1.SecretKeyCurrent] = v
	}
}

// The session's writes to the signing Secret start from what it last read or wrote, and keep
// its view (s.signing) in step, so one reconcile plans and acts on what the Secret holds now
// and a new subscription costs one read and one write of it, not a read before every write.
//
// Under the account's lock the writes wait (the session's ops have a before hook): each change is applied to the
// session's view at once, and written (all waiting changes in one write) just before the
// provider's next request (ops.before) or, for the changes after the last one, once the lock
// is released. The provider hears of nothing in an order it did not before, and an account's
// next subscription does not wait for this one's Secret write: a new Stripe subscription's
// only write of it (the secret its create returned) happens outside the lock. Nothing is lost
// on failure: the write happens when the reconcile ends, whatever it returns, and a crash
// before it leaves what a failed write leaves (a registration whose secret is not held, which
// the next reconcile recovers or rotates).

// mutate applies fn to the signing Secret: in the session's view, and in the Secret now or,
// while writes wait (the session's ops flush them before every provider request), at the next
// flush. The view's obj stays the Secret as the API server answered: writes start from it.
func (s *session) mutate(ctx context.Context, fn func(sec *corev1.Secret)) error {
	s.unwritten = append(s.unwritten, fn)
	if s.ops.Before == nil {
		return s.flush(ctx)
	}
	view, _, err := s.r.signingSecretWith(s.sub, s.signing.Obj, s.applyUnwritten)
	if err != nil {
		s.unwritten = s.unwritten[:len(s.unwritten)-1]
		return err
	}
	known := s.signing.Obj
	s.signing = account.ParseSigningState(view, s.sub)
	s.signing.Obj = known
	return nil
}

// flush writes the waiting changes, in one write, and takes what was written as the view. A
// failed write drops them and the view goes back to what the API server last answered: the
// reconcile fails, and the next one starts from a fresh read.
func (s *session) flush(ctx context.Context) error {
	if len(s.unwritten) == 0 {
		return nil
	}
	sec, err := s.r.writeSigningSecret(ctx, s.sub, s.signing.Obj, s.applyUnwritten)
	s.unwritten = nil
	if err != nil {
		s.signing = account.ParseSigningState(s.signing.Obj, s.sub)
		return err
	}
	s.signing = account.ParseSigningState(sec, s.sub)
	return nil
}

func (s *session) applyUnwritten(sec *corev1.Secret) {
	for _, fn := range s.unwritten {
		fn(sec)
	}
}

// claimImported makes the subscription the controller of a signing Secret written by
// `hookwarden import --secret`, so it is garbage-collected with it like the ones the manager
// writes.
func (s *session) claimImported(ctx context.Context) error {
	return s.mutate(ctx, func(sec *corev1.Secret) { delete(sec.Annotations, hookv1.AnnotationImportedFor) })
}

// storeSecret records the provider-returned secret of registration id (current, when no
// registration's is yet).
func (s *session) storeSecret(ctx context.Context, id, secret string) error {
	return s.mutate(ctx, func(sec *corev1.Secret) {
		sec.Data[hookv1.SecretKeyFor(id)] = []byte(secret)
		if sec.Annotations[hookv1.AnnotationEndpointID] == "" {
			setCurrent(sec, id)
		}
	})
}

// pendingSecret returns the pending client-chosen secret, generating and storing one first when
// there is none. A pending secret is reused, never replaced: after a crash it may already be the
// one the provider verifies with. It is stored before the provider is asked to use it, so that
// whatever happens next, the Secret holds the secret the registration may end up verifying with
// (and the receiver accepts it).
func (s *session) pendingSecret(ctx context.Context) (string, error) {
	if s.signing.Pending != nil {
		return string(s.signing.Pending), nil
	}
	secret, err := newClientSecret()
	if err != nil {
		return "", err
	}
	if err := s.mutate(ctx, func(sec *corev1.Secret) { sec.Data[hookv1.SecretKeyPending] = []byte(secret) }); err != nil {
		return "", err
	}
	return secret, nil
}

// confirmPending records the pending secret as registration id's, now that the provider uses
// it, makes it current and forgets the pending copy. The secret id had before is dropped: the
// provider verifies with the new one only.
func (s *session) confirmPending(ctx context.Context, id, secret string) error {
	return s.mutate(ctx, func(sec *corev1.Secret) {
		sec.Data[hookv1.SecretKeyFor(id)] = []byte(secret)
		delete(sec.Data, hookv1.SecretKeyPending)
		setCurrent(sec, id)
	})
}

// describeVerifier keeps the provider's verification scheme, where it has to be described
// (a REST profile's), in the signing Secret beside the secrets, for the receiver.
func (s *session) describeVerifier(ctx context.Context) error {
	spec, ok := s.ops.VerifierSpec()
	if !ok || string(s.signing.Verifier) == string(spec) {
		return nil
	}
	return s.mutate(ctx, func(sec *corev1.Secret) { sec.Data[hookv1.SecretKeyVerifier] = spec })
}

// markCurrent makes registration id's secret the current one.
func (s *session) markCurrent(ctx context.Context, id string) error {
	return s.mutate(ctx, func(sec *corev1.Secret) { setCurrent(sec, id) })
}

// forgetSecret drops the secret of a registration that is gone.
func (s *session) forgetSecret(ctx context.Context, id string) error {
	return s.mutate(ctx, func(sec *corev1.Secret) { delete(sec.Data, hookv1.SecretKeyFor(id)) })
}

// clientSecretBytes is the entropy of a secret we choose: 256 bits, hex-encoded (64 characters,
// accepted by every provider as a plain string).
const clientSecretBytes = 32

func newClientSecret() (string, error) {
	b := make([]byte, clientSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a signing secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}
