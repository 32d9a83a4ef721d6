package controllers_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
)

// Two subscriptions never own one registration: on GitHub (no marker), a second subscription
// for a hook another one records, or two new ones for one existing hook, used to each set a new
// secret on it, so the first one's deliveries failed verification while both showed Ready.
var _ = Describe("Two subscriptions for one registration", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	BeforeAll(func() { mgr = startManager(managerOptions{}) })
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	// secondNamespace is another namespace with the same GitHub token as t.
	secondNamespace := func(t *ghTenant) string {
		ns := t.ns + "-imp"
		Expect(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "github-api"}, StringData: map[string]string{"token": t.token}})).To(Succeed())
		return ns
	}
	secretChanges := func(t *ghTenant, id string) int {
		n := 0
		for _, r := range t.requests(ghfake.OpUpdate) {
			if r.Path == "/"+t.target+"/hooks/"+id {
				n++
			}
		}
		return n
	}
	expectStalledBy := func(s *hookv1.WebhookSubscription, owner string) {
		Eventually(func(g Gomega) {
			st := condition(get(g, s), hookv1.ConditionStalled)
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.Reason).To(Equal(hookv1.ReasonOwnedByAnother))
			g.Expect(st.Message).To(ContainSubstring(owner))
		}).WithTimeout(20 * time.Second).Should(Succeed())
	}

	It("a second subscription for a hook another one records stalls naming it, changes nothing, and deletes nothing when deleted", func() {
		t := newGHTenant(true)
		first := t.sub("repo", "https://hooks.example.com/hooks/shop/repo")
		Expect(k8s.Create(suiteCtx, first)).To(Succeed())
		live := expectReady(first)
		h := t.hooks()[0]
		expectGHSecret(first, h)
		secret := h.Config.Secret
		updates := secretChanges(t, live.Status.EndpointID)

		second := t.sub("github-"+live.Status.EndpointID, "https://hooks.example.com/hooks/shop/repo")
		second.Namespace = secondNamespace(t)
		second.Spec.Policies.Adoption = hookv1.AdoptionAdopt
		Expect(k8s.Create(suiteCtx, second)).To(Succeed())
		expectStalledBy(second, t.ns+"/repo")

		Consistently(func(g Gomega) {
			hs := t.hooks()
			g.Expect(hs).To(HaveLen(1), "no second hook")
			g.Expect(hs[0].Config.Secret).To(Equal(secret), "the first one's secret is left on the hook")
			g.Expect(secretChanges(t, live.Status.EndpointID)).To(Equal(updates))
			g.Expect(get(g, second).Status.EndpointID).To(BeEmpty())
		}).WithTimeout(4 * time.Second).Should(Succeed())
		expectReady(first)
		expectGHSecret(first, h)

		Expect(k8s.Delete(suiteCtx, second)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKeyFromObject(second), &hookv1.WebhookSubscription{}))
		}).Should(BeTrue())
		Expect(t.hooks()).To(HaveLen(1), "deleting the second subscription leaves the first one's hook")
		Expect(t.requests(ghfake.OpDelete)).To(BeEmpty())
	})

	It("two new subscriptions for one existing hook: one adopts it, the other stalls naming it; one secret change", func() {
		t := newGHTenant(true)
		h := ghSrv.Seed(t.target, ghfake.Hook{Active: true, Events: []string{"push", "pull_request"}, Config: ghfake.Config{URL: "https://hooks.example.com/hooks/shop/twice", ContentType: "json", InsecureSSL: "0", Secret: "made-by-hand"}})
		ns2 := secondNamespace(t)
		var subs []*hookv1.WebhookSubscription
		for i, ns := range []string{t.ns, ns2} {
			s := t.sub(fmt.Sprintf("twice-%d", i), "https://hooks.example.com/hooks/shop/twice")
			s.Namespace = ns
			subs = append(subs, s)
		}
		for _, s := range subs {
			Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		}
		var owner, other *hookv1.WebhookSubscription
		Eventually(func(g Gomega) {
			for i, s := range subs {
				if c := condition(get(g, s), hookv1.ConditionReady); c != nil && c.Status == metav1.ConditionTrue {
					owner, other = s, subs[1-i]
				}
			}
			g.Expect(owner).NotTo(BeNil())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		expectStalledBy(other, owner.Namespace+"/"+owner.Name)
		expectGHSecret(owner, h)
		Consistently(func(g Gomega) {
			g.Expect(t.hooks()).To(HaveLen(1))
			g.Expect(secretChanges(t, hookID(h))).To(Equal(1), "one new secret, set by the subscription that adopted the hook")
			g.Expect(get(g, other).Status.EndpointID).To(BeEmpty())
		}).WithTimeout(4 * time.Second).Should(Succeed())
		Expect(t.creates()).To(BeZero())
	})
})
