package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
)

// TestAwaitsImportedSecret: a subscription `hookwarden import --secret` wrote waits, a short
// time from its creation, for the signing Secret written beside it before it gets its
// registration a new secret; nothing else waits.
func TestAwaitsImportedSecret(t *testing.T) {
	imported := func(annotations ...string) *hookv1.WebhookSubscription {
		s := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}, Spec: hookv1.WebhookSubscriptionSpec{SigningSecret: hookv1.SigningSecretSpec{Name: "orders-signing"}}}
		for i := 0; i+1 < len(annotations); i += 2 {
			s.Annotations[annotations[i]] = annotations[i+1]
		}
		return s
	}
	withSecret := imported(hookv1.AnnotationImportedFrom, "we_1", hookv1.AnnotationImportedSecret, "orders-signing")
	rotation := decidetest.Keeps(decidetest.Reg("we_1", 0, decidetest.Unmarked), decidetest.ReplaceStep(decidetest.Reg("we_1", 0, decidetest.Unmarked)))
	setSecret := decidetest.Keeps(decidetest.Hook("7", 0), decidetest.SetSecretStep(decidetest.Hook("7", 0)))
	cases := []struct {
		reason  string
		p       decide.Plan
		sub     *hookv1.WebhookSubscription
		exists  bool
		age     time.Duration
		want    time.Duration
		waiting bool
	}{
		{"imported with a secret, its Secret not there yet: wait the rest of the time", rotation, withSecret, false, 10 * time.Second, ImportedSecretWait - 10*time.Second, true},
		{"GitHub: no new secret set on the hook before the Secret comes", setSecret, imported(hookv1.AnnotationImportedFrom, "7", hookv1.AnnotationImportedSecret, "orders-signing"), false, 0, ImportedSecretWait, true},
		{"the Secret is there", rotation, withSecret, true, 0, 0, false},
		{"waited long enough: rotate", rotation, withSecret, false, ImportedSecretWait, 0, false},
		{"imported without a secret: nothing to wait for", rotation, imported(hookv1.AnnotationImportedFrom, "we_1"), false, 0, 0, false},
		{"the annotation names another Secret than the spec (edited since): no wait", rotation, imported(hookv1.AnnotationImportedFrom, "we_1", hookv1.AnnotationImportedSecret, "other"), false, 0, 0, false},
		{"not the imported registration", decidetest.Keeps(decidetest.Reg("we_2", 0, decidetest.Unmarked), decidetest.ReplaceStep(decidetest.Reg("we_2", 0, decidetest.Unmarked))), withSecret, false, 0, 0, false},
		{"nothing gets a secret anew", decidetest.Keeps(decidetest.Reg("we_1", 0)), withSecret, false, 0, 0, false},
		{"a subscription nobody imported", rotation, imported(), false, 0, 0, false},
	}
	for _, c := range cases {
		got, waiting := awaitsImportedSecret(c.p, c.sub, c.exists, c.age)
		if got != c.want || waiting != c.waiting {
			t.Errorf("%s: (%s, %v), want (%s, %v)", c.reason, got, waiting, c.want, c.waiting)
		}
	}
}
