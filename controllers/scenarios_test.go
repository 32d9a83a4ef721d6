package controllers_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
)

// Scenarios whose steps and assertions are the same on every provider, written once over what
// a provider's tenant can say about its account.

// scenarioTenant is one test's namespace and provider account.
type scenarioTenant interface {
	// sub returns a valid subscription on the account; mutate it before creating it.
	sub(name, url string) *hookv1.WebhookSubscription
	// registrations are the URLs of every registration the account holds, by id.
	registrations() map[string]string
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
	regs := t.registrations()
	Expect(regs).NotTo(HaveKey(delID), "policy Delete removed it")
	Expect(regs).To(HaveKey(orphanID), "policy Orphan kept it")

	creds := t.credentials()
	Expect(k8s.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: creds.Namespace, Name: creds.Name}})).To(Succeed())
	// The manager learns of the deletion from its watch (it reads a credential once per
	// version of its Secret): until then it may still use the credential it holds, and a
	// deletion would succeed. The subscription saying so is the sign it has seen it.
	Eventually(func(g Gomega) {
		c := condition(get(g, blocked), hookv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsNotFound))
	}).WithTimeout(20 * time.Second).Should(Succeed())
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
	Expect(t.registrations()).To(HaveKey(blockedID), "nothing deleted without credentials")

	t.writeCredentials()
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKeyFromObject(blocked), &hookv1.WebhookSubscription{}))
	}).WithTimeout(20 * time.Second).Should(BeTrue())
	Expect(t.registrations()).NotTo(HaveKey(blockedID))
}

// createAndCrash creates s under a manager that hangs, as if killed, right after the provider
// answered the first create in s's namespace (nothing after the answer runs), and stops it
// there. Stop the suite's manager first: two managers would race for the create.
func createAndCrash(s *hookv1.WebhookSubscription) {
	var crashed atomic.Bool
	crashing := startManager(managerOptions{afterCreate: func(ctx context.Context, sub *hookv1.WebhookSubscription, reg providers.Registration) error {
		if sub.Namespace == s.Namespace && crashed.CompareAndSwap(false, true) {
			<-ctx.Done()
			return errSimulatedCrash
		}
		return nil
	}})
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	Eventually(crashed.Load).Should(BeTrue())
	crashing.Stop()
}

// expectStatusClearedTakenBack is scenario d: s is created and becomes Ready; its status wiped
// by hand is taken back at the next resync, the same registration, with writes (what the
// provider must not be asked again) unchanged and still one registration on the account.
func expectStatusClearedTakenBack(t scenarioTenant, s *hookv1.WebhookSubscription, writes func() int) {
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	before := expectReady(s)
	n := writes()
	// The manager writes status too: a write that meets one of its writes is retried on the
	// latest version.
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cleared := &hookv1.WebhookSubscription{}
		if err := k8s.Get(suiteCtx, client.ObjectKeyFromObject(s), cleared); err != nil {
			return err
		}
		cleared.Status = hookv1.WebhookSubscriptionStatus{}
		return k8s.Status().Update(suiteCtx, cleared)
	})).To(Succeed())
	Eventually(func(g Gomega) {
		got := get(g, s)
		g.Expect(got.Status.EndpointID).To(Equal(before.Status.EndpointID))
		g.Expect(condition(got, hookv1.ConditionReady)).NotTo(BeNil())
		g.Expect(condition(got, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	Expect(writes()).To(Equal(n))
	Expect(t.registrations()).To(ConsistOf(before.Status.URL))
	Expect(t.registrations()).To(HaveKey(before.Status.EndpointID))
}

// expectURLChangeFollowed is scenario h up to the secret: a subscription whose URL changes
// gets a new registration for the new URL, the old one is removed and the signing Secret
// forgets its secret. It returns the subscription and the old and new registrations' ids, for
// the provider's own checks.
func expectURLChangeFollowed(t scenarioTenant) (s *hookv1.WebhookSubscription, old, id string) {
	const v1, v2 = "https://hooks.example.com/v1", "https://hooks.example.com/v2"
	s = t.sub("orders", v1)
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	old = expectReady(s).Status.EndpointID
	Eventually(func(g Gomega) {
		cur := get(g, s)
		cur.Spec.Endpoint.URL = v2
		g.Expect(k8s.Update(suiteCtx, cur)).To(Succeed())
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		regs := t.registrations()
		g.Expect(regs).To(HaveLen(1))
		g.Expect(regs).To(ContainElement(v2))
		g.Expect(regs).NotTo(HaveKey(old))
		cur := get(g, s)
		g.Expect(regs).To(HaveKey(cur.Status.EndpointID))
		g.Expect(cur.Status.URL).To(Equal(v2))
		g.Expect(signingSecret(g, s).Data).NotTo(HaveKey(hookv1.SecretKeyFor(old)))
		id = cur.Status.EndpointID
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return s, old, id
}

// createReady creates s and waits until it is Ready.
func createReady(s *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
	GinkgoHelper()
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	return expectReady(s)
}

// deleteSigningSecret deletes s's signing Secret, as a user might by mistake.
func deleteSigningSecret(s *hookv1.WebhookSubscription) {
	GinkgoHelper()
	Expect(k8s.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Spec.SigningSecret.Name}})).To(Succeed())
}

// expectRateLimitedThenReady is scenario i once the provider's rate-limit answer is injected:
// s is created, says RateLimited while it waits, and ends Ready.
func expectRateLimitedThenReady(s *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
	GinkgoHelper()
	expectRateLimited(s)
	return expectReady(s)
}

// expectRateLimited creates s and waits until it says RateLimited.
func expectRateLimited(s *hookv1.WebhookSubscription) {
	GinkgoHelper()
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	Eventually(func(g Gomega) {
		c := condition(get(g, s), hookv1.ConditionReconciling)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(hookv1.ReasonRateLimited))
		g.Expect(c.Message).To(ContainSubstring("rate limit"))
	}).Should(Succeed())
}
