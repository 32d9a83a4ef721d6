package controllers_test

import (
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// Scenarios whose steps and assertions are the same on every provider, written once over what
// a provider's tenant can say about its account.

// scenarioTenant is one test's namespace and provider account.
type scenarioTenant interface {
	// sub returns a valid subscription on the account; mutate it before creating it.
	sub(name, url string) *hookv1.WebhookSubscription
	// registrationIDs are the ids of every registration the account holds.
	registrationIDs() []string
	// credentials is the Secret holding the account's credential; writeCredentials creates it.
	credentials() client.ObjectKey
	writeCredentials()
}

// expectDeletionPolicies is scenario j: deleting a subscription deletes its registration
// (policy Delete) or leaves it (Orphan); with the credentials gone the finalizer stays, says
// why in the Ready condition and an Event, and deletion finishes once they are restored.
func expectDeletionPolicies(t scenarioTenant) {
	del, orphan, blocked := t.sub("deleted", "https://hooks.example.com/del"), t.sub("orphaned", "https://hooks.example.com/orphan"), t.sub("blocked", "https://hooks.example.com/blocked")
	orphan.Spec.Policies.Deletion = hookv1.DeletionOrphan
	for _, s := range []*hookv1.WebhookSubscription{del, orphan, blocked} {
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
	}
	delID, orphanID := get(Default, del).Status.EndpointID, get(Default, orphan).Status.EndpointID
	Expect(k8s.Delete(suiteCtx, del)).To(Succeed())
	Expect(k8s.Delete(suiteCtx, orphan)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKeyFromObject(del), &hookv1.WebhookSubscription{}))).To(BeTrue())
		g.Expect(apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKeyFromObject(orphan), &hookv1.WebhookSubscription{}))).To(BeTrue())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	ids := t.registrationIDs()
	Expect(ids).NotTo(ContainElement(delID), "policy Delete removed it")
	Expect(ids).To(ContainElement(orphanID), "policy Orphan kept it")

	creds := t.credentials()
	Expect(k8s.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: creds.Namespace, Name: creds.Name}})).To(Succeed())
	Expect(k8s.Delete(suiteCtx, blocked)).To(Succeed())
	Eventually(func(g Gomega) {
		c := condition(get(g, blocked), hookv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsNotFound))
		g.Expect(c.Message).To(ContainSubstring(creds.Name))
		g.Expect(c.Message).To(ContainSubstring("cannot delete"))
		g.Expect(hasEvent(g, blocked, hookv1.ReasonCredentialsNotFound, "cannot delete")).To(BeTrue())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	Consistently(func() error {
		return k8s.Get(suiteCtx, client.ObjectKeyFromObject(blocked), &hookv1.WebhookSubscription{})
	}).WithTimeout(3*time.Second).Should(Succeed(), "the finalizer is not released silently")
	blockedID := get(Default, blocked).Status.EndpointID
	Expect(t.registrationIDs()).To(ContainElement(blockedID), "nothing deleted without credentials")

	t.writeCredentials()
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKeyFromObject(blocked), &hookv1.WebhookSubscription{}))
	}).WithTimeout(20 * time.Second).Should(BeTrue())
	Expect(t.registrationIDs()).NotTo(ContainElement(blockedID))
}
