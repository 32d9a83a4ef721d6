package controllers_test

import (
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// Stripe v2 event destinations' figures (issue 32): one subscription through its first
// reconcile, a restart's resync and a rotation, counted in the fake Stripe's request log.

// calls are the tenant's logged requests from index from on, a destination's id as {id}.
func (t *tenant) calls(from int) []call {
	var out []call
	for _, r := range t.srv.Requests() {
		if r.Account != fake.AccountLabel(t.apiKey) {
			continue
		}
		if from > 0 {
			from--
			continue
		}
		p := r.Path
		if head, _, ok := strings.Cut(p, "/event_destinations/"); ok {
			p = head + "/event_destinations/{id}"
		}
		out = append(out, call{r.Method, p})
	}
	return out
}

var _ = Describe("WebhookSubscription on Stripe v2 event destinations", Ordered, func() {
	var mgr *runningManager
	BeforeAll(func() { mgr = startManager(managerOptions{}) })
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	It("v2: a first reconcile creates one destination, a restart's resync only reads, and a rotation holds both secrets until the old destination is gone", func() {
		t := newTenant()
		s := t.sub("orders", "https://hooks.example.com/v2/orders")
		s.Spec.Provider.Stripe = &hookv1.StripeProvider{APIVersion: hookv1.StripeV2}
		// No periodic resync in the windows counted: the restart's reconcile is the resync.
		s.Spec.ResyncInterval = &metav1.Duration{Duration: time.Hour}
		count := func() int { return len(t.calls(0)) }
		id := createReady(s).Status.EndpointID
		Expect(t.srv.Destinations(t.apiKey)).To(HaveLen(1))
		first := settled(count)
		reportRequests("stripe-v2", "first-reconcile", t.calls(0))

		mgr.Stop()
		mgr = startManager(managerOptions{})
		Eventually(count).WithTimeout(20 * time.Second).Should(BeNumerically(">", first))
		expectReady(s)
		resync := t.calls(first)[:settled(count)-first]
		reportRequests("stripe-v2", "steady-resync", resync)
		expectReadsOnly(resync)

		old := string(signingSecret(Default, s).Data[hookv1.SecretKeyCurrent])
		Expect(old).NotTo(BeEmpty())
		w := watchOverlap(s, old)
		before := count()
		annotate(s, hookv1.AnnotationRotateRequestedAt, "2026-12-07T10:00:00Z")
		Eventually(func(g Gomega) {
			cur := get(g, s)
			g.Expect(cur.Status.LastHandledRotateAt).To(Equal("2026-12-07T10:00:00Z"))
			g.Expect(cur.Status.EndpointID).NotTo(Equal(id))
			ds := t.srv.Destinations(t.apiKey)
			g.Expect(ds).To(HaveLen(1), "the old destination deleted")
			g.Expect(ds[0].ID).To(Equal(cur.Status.EndpointID))
			sec := signingSecret(g, s)
			g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(ds[0].Secret))
			g.Expect(sec.Data).NotTo(HaveKey(hookv1.SecretKeyFor(id)), "the old destination's secret is dropped")
		}).WithTimeout(30 * time.Second).Should(Succeed())
		rotation := t.calls(before)[:settled(count)-before]
		w.report("stripe-v2", "the rotation sent "+tally(rotation)+": a new destination, its Stripe-made secret stored, then the old destination deleted (both destinations exist until that DELETE)")
		Expect(rotation).To(ContainElement(call{http.MethodDelete, "/v2/core/event_destinations/{id}"}))
		expectReady(s)
	})
})
