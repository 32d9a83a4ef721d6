package account

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
)

// The signing Secret holds one key per registration whose secret may still sign deliveries
// (hookv1.SecretKeyFor: "whsec.<id>"), plus "signingSecret" for the current one. Keeping every live secret lets the
// receiver accept both sides of a rotation until the old registration is deleted. The manager
// writes it; the manager and the command line read it through SigningState.

// SigningState is what the signing Secret holds: the secret of each registration by id, the id
// whose secret is current ("" when none is, or the Secret is inconsistent), and a client-chosen
// secret not yet confirmed by the provider (nil when none).
type SigningState struct {
	Secrets map[string][]byte
	Current string
	Pending []byte
	// Verifier is the stored description of the verification scheme (REST profiles).
	Verifier []byte
	// Imported: the Secret is one `hookwarden import --secret` wrote, not yet controlled by the
	// subscription (see ImportedFor).
	Imported bool
	// Obj is the Secret as the API server last answered it, to a read or to the manager's own
	// write (nil: it did not exist). Writes start from it instead of reading again, and carry
	// its resourceVersion, so a Secret changed by anyone else meanwhile fails the write (a
	// conflict, and the reconcile retries from a fresh read) rather than being overwritten.
	Obj *corev1.Secret
}

// Held reports the ids of the registrations whose secret is held.
func (st SigningState) Held() map[string]bool {
	held := make(map[string]bool, len(st.Secrets))
	for id := range st.Secrets {
		held[id] = true
	}
	return held
}

// ParseSigningState reads what sec, sub's signing Secret, holds (nil: nothing).
func ParseSigningState(sec *corev1.Secret, sub *hookv1.WebhookSubscription) SigningState {
	st := SigningState{Secrets: secretsIn(sec), Obj: sec}
	if sec == nil {
		return st
	}
	if v := sec.Data[hookv1.SecretKeyPending]; len(v) > 0 {
		st.Pending = v
	}
	st.Verifier = sec.Data[hookv1.SecretKeyVerifier]
	st.Imported = ImportedFor(sec, sub)
	current := sec.Annotations[hookv1.AnnotationEndpointID]
	if v := sec.Data[hookv1.SecretKeyCurrent]; current == "" || len(v) == 0 || string(v) != string(sec.Data[hookv1.SecretKeyFor(current)]) {
		current = ""
	}
	st.Current = current
	return st
}

// secretsIn are the registrations' secrets a signing Secret holds, by id (none for nil).
func secretsIn(sec *corev1.Secret) map[string][]byte {
	out := map[string][]byte{}
	if sec == nil {
		return out
	}
	for k, v := range sec.Data {
		if id, ok := hookv1.SecretIDOf(k); ok && len(v) > 0 {
			out[id] = v
		}
	}
	return out
}

// HeldSecrets are the ids of the registrations whose secret a signing Secret holds.
func HeldSecrets(sec *corev1.Secret) map[string]bool {
	return SigningState{Secrets: secretsIn(sec)}.Held()
}

// ImportedFor reports whether sec is a signing Secret `hookwarden import --secret` wrote for sub:
// no controller yet, and marked for sub by name. Its secret is the one the provider verifies
// with, so adopting the registration needs no rotation.
func ImportedFor(sec *corev1.Secret, sub *hookv1.WebhookSubscription) bool {
	return metav1.GetControllerOf(sec) == nil && sec.Annotations[hookv1.AnnotationImportedFor] == sub.Name && sec.Labels[hookv1.LabelSubscription] == sub.Name
}

// CheckSigningSecret refuses sec (non-nil) as sub's signing Secret unless sub controls it or
// import wrote it for sub: a conflict, stalled, never overwritten.
func CheckSigningSecret(sec *corev1.Secret, sub *hookv1.WebhookSubscription) error {
	if !metav1.IsControlledBy(sec, sub) && !ImportedFor(sec, sub) {
		return decide.NewStall(hookv1.ReasonConflict, "signing Secret %s/%s exists and is not owned by this subscription; choose another spec.signingSecret.name or delete it", sec.Namespace, sec.Name)
	}
	return nil
}

// ReadSigningSecret reads sub's signing Secret through r: nil when there is none, a Conflict
// stall when the Secret is neither sub's nor imported for it (CheckSigningSecret).
func ReadSigningSecret(ctx context.Context, r client.Reader, sub *hookv1.WebhookSubscription) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	if err := r.Get(ctx, SigningSecretKey(sub), sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading signing Secret %s: %w", sub.Spec.SigningSecret.Name, err)
	}
	if err := CheckSigningSecret(sec, sub); err != nil {
		return nil, err
	}
	return sec, nil
}

// SigningSecretKey names sub's signing Secret.
func SigningSecretKey(sub *hookv1.WebhookSubscription) types.NamespacedName {
	return types.NamespacedName{Namespace: sub.Namespace, Name: sub.Spec.SigningSecret.Name}
}
