package receiver

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// The receiver verifies with the secret of every registration the route Secret holds, whichever
// form the registration's key takes (hookv1.SecretKeyFor: a Bitbucket hook's "{uuid}" id is kept
// in hex), and with nothing else.
func TestSigningSecretsOfEveryRegistrationKey(t *testing.T) {
	sec := &corev1.Secret{Data: map[string][]byte{
		hookv1.SecretKeyCurrent:            []byte("new"),
		hookv1.SecretKeyFor("{0f1e-2d3c}"): []byte("new"),
		hookv1.SecretKeyFor("{9a8b-7c6d}"): []byte("old"),
		"user-note":                        []byte("not a secret"),
	}}
	var got []string
	for _, s := range signingSecrets(sec) {
		got = append(got, string(s))
	}
	if want := []string{"new", "old"}; !cmp.Equal(got, want) {
		t.Errorf("signingSecrets = %q, want %q", got, want)
	}
}
