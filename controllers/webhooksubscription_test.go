package controllers_test

import (
	"errors"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

var _ = Describe("WebhookSubscription on Stripe", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	BeforeAll(func() { mgr = startManager(managerOptions{}) })
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})
	restart := func() {
		mgr.Stop()
		mgr = startManager(managerOptions{})
	}

	It("a: registers exactly one endpoint, stores its secret and becomes Ready", func() {
		t := newTenant()
		s := t.sub("orders", "https://Hooks.Example.com:443/hooks/shop/orders")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		got := expectReady(s)

		eps := t.endpoints()
		Expect(eps).To(HaveLen(1))
		Expect(eps[0].URL).To(Equal("https://hooks.example.com/hooks/shop/orders"), "registered in canonical form")
		Expect(eps[0].EnabledEvents).To(ConsistOf("checkout.session.completed", "invoice.paid"))
		Expect(eps[0].APIVersion).To(Equal("2023-10-16"))
		Expect(eps[0].Metadata).To(HaveKeyWithValue("hookwarden_uid", string(got.UID)))
		Expect(eps[0].Metadata).To(HaveKeyWithValue("hookwarden_cluster", clusterName))
		Expect(got.Status.EndpointID).To(Equal(eps[0].ID))
		Expect(got.Status.URL).To(Equal(eps[0].URL))
		Expect(got.Status.LastSyncTime).NotTo(BeNil())
		Expect(got.Finalizers).To(ContainElement(hookv1.Finalizer))
		Expect(t.creates()).To(Equal(1))
		for _, r := range t.requests("POST", "/v1/webhook_endpoints") {
			Expect(r.IdempotencyKey).NotTo(BeEmpty(), "every write carries an Idempotency-Key")
		}

		Eventually(func(g Gomega) {
			sec := signingSecret(g, s)
			g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(eps[0].Secret))
			g.Expect(string(sec.Data[hookv1.SecretKeyFor(eps[0].ID)])).To(Equal(eps[0].Secret))
			g.Expect(sec.Labels).To(HaveKeyWithValue(hookv1.LabelSigningSecret, "true"))
			g.Expect(sec.Annotations).To(HaveKeyWithValue(hookv1.AnnotationEndpointID, eps[0].ID))
			g.Expect(metav1.IsControlledBy(sec, got)).To(BeTrue())
		}).Should(Succeed())
		Expect(hasEventNow(s, hookv1.ReasonCreated, eps[0].ID)).To(BeTrue())
	})

	It("b: a restarted manager creates nothing", func() {
		t := newTenant()
		subs := []*hookv1.WebhookSubscription{
			t.sub("one", "https://hooks.example.com/one"),
			t.sub("two", "https://hooks.example.com/two"),
		}
		for _, s := range subs {
			Expect(k8s.Create(suiteCtx, s)).To(Succeed())
			expectReady(s)
		}
		Expect(t.endpoints()).To(HaveLen(2))
		createsBefore, listsBefore := t.creates(), t.lists()

		restart()
		// The new manager has re-read the account (its caches started empty) ...
		Eventually(t.lists).WithTimeout(20 * time.Second).Should(BeNumerically(">", listsBefore))
		for _, s := range subs {
			expectReady(s)
		}
		// ... and over several resyncs made no create.
		Consistently(t.creates).WithTimeout(5 * time.Second).Should(Equal(createsBefore))
		Expect(t.endpoints()).To(HaveLen(2))
	})

	It("c: a crash between the provider's create response and the status write leaves one endpoint and recovers the secret", func() {
		t := newTenant()
		mgr.Stop()
		s := t.sub("orders", "https://hooks.example.com/crash")
		createAndCrash(s)
		Expect(t.endpoints()).To(HaveLen(1), "the provider created the endpoint")
		Expect(apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKey{Namespace: t.ns, Name: "orders-signing"}, &corev1.Secret{}))).To(BeTrue(), "nothing was written before the crash")

		mgr = startManager(managerOptions{})
		got := expectReady(s)
		eps := t.endpoints()
		Expect(eps).To(HaveLen(1), "no twin after restart")
		Expect(got.Status.EndpointID).To(Equal(eps[0].ID))
		Eventually(func(g Gomega) {
			g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(eps[0].Secret))
		}).Should(Succeed())
		// The secret came back through an idempotent replay of the same create.
		replays := 0
		for _, r := range t.requests("POST", "/v1/webhook_endpoints") {
			if r.Path == "/v1/webhook_endpoints" && r.Replayed {
				replays++
			}
		}
		Expect(replays).To(Equal(1))
	})

	It("d: status cleared by hand is adopted without a create", func() {
		t := newTenant()
		s := t.sub("orders", "https://hooks.example.com/cleared")
		expectStatusClearedTakenBack(t, s, t.creates)
	})

	It("e: repairs out-of-band edits: a deleted endpoint is recreated, edited events are updated in place", func() {
		t := newTenant()
		s := t.sub("orders", "https://hooks.example.com/oob")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		first := expectReady(s)
		oldID := first.Status.EndpointID

		// Someone deletes the endpoint in the dashboard.
		Expect(t.srv.Remove(t.apiKey, oldID)).To(BeTrue())
		var newEP fake.Endpoint
		Eventually(func(g Gomega) {
			eps := t.endpoints()
			g.Expect(eps).To(HaveLen(1))
			g.Expect(eps[0].ID).NotTo(Equal(oldID))
			newEP = eps[0]
			got := get(g, s)
			g.Expect(got.Status.EndpointID).To(Equal(newEP.ID))
			sec := signingSecret(g, s)
			g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(newEP.Secret))
			g.Expect(sec.Data).NotTo(HaveKey(hookv1.SecretKeyFor(oldID)), "the deleted endpoint's secret is no longer accepted")
		}).WithTimeout(20 * time.Second).Should(Succeed())

		// Someone edits its events in the dashboard.
		t.srv.ResetRequests()
		Expect(t.srv.Edit(t.apiKey, newEP.ID, func(e *fake.Endpoint) { e.EnabledEvents = []string{"charge.failed"} })).To(BeTrue())
		Eventually(func(g Gomega) {
			eps := t.endpoints()
			g.Expect(eps).To(HaveLen(1))
			g.Expect(eps[0].ID).To(Equal(newEP.ID), "updated in place, same id")
			g.Expect(eps[0].EnabledEvents).To(ConsistOf("checkout.session.completed", "invoice.paid"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(t.requests("POST", "/v1/webhook_endpoints/"+newEP.ID)).NotTo(BeEmpty())
		Expect(t.creates()).To(Equal(0), "no delete-and-recreate, which would rotate the secret")
		expectReady(s)
	})

	It("f: prunes twins for the same canonical URL and reports a foreign near-twin without touching it", func() {
		t := newTenant()
		s := t.sub("orders", "https://Hooks.Example.com/hooks/a%2fb")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		got := expectReady(s)
		kept := got.Status.EndpointID

		marker := stripe.MarkerMetadata(providers.Owner{Cluster: clusterName, Namespace: t.ns, Name: "orders", UID: string(got.UID)}, "")
		ours := t.srv.Seed(t.apiKey, fake.Endpoint{URL: "https://hooks.example.com:443/hooks/a%2Fb", EnabledEvents: []string{"invoice.paid"}, Metadata: marker})
		unmarked := t.srv.Seed(t.apiKey, fake.Endpoint{URL: "https://hooks.example.com/hooks/a%2fb", EnabledEvents: []string{"*"}})
		nearTwin := t.srv.Seed(t.apiKey, fake.Endpoint{URL: "https://hooks.example.com/hooks/a%2Fb/", EnabledEvents: []string{"*"}})

		Eventually(func(g Gomega) {
			var ids []string
			for _, e := range t.endpoints() {
				ids = append(ids, e.ID)
			}
			g.Expect(ids).To(ConsistOf(kept, nearTwin.ID))
			got := get(g, s)
			g.Expect(got.Status.TwinsPruned).To(Equal(int32(2)))
			g.Expect(got.Status.EndpointID).To(Equal(kept))
			c := condition(got, hookv1.ConditionTwinsFound)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring(nearTwin.ID))
			g.Expect(hasEvent(g, s, hookv1.ReasonNearTwinFound, nearTwin.ID)).To(BeTrue())
			g.Expect(hasEvent(g, s, hookv1.ReasonTwinsPruned, ours.ID)).To(BeTrue())
			g.Expect(hasEvent(g, s, hookv1.ReasonTwinsPruned, unmarked.ID)).To(BeTrue())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(t.requests("", "/v1/webhook_endpoints/"+nearTwin.ID)).To(BeEmpty(), "the near-twin is never changed")
		Expect(t.srv.Endpoints(t.apiKey)).To(ContainElement(HaveField("ID", nearTwin.ID)))
		expectReady(s)
	})

	It("g: never changes foreign endpoints elsewhere on the account", func() {
		t := newTenant()
		foreign := []fake.Endpoint{
			t.srv.Seed(t.apiKey, fake.Endpoint{URL: "https://other.example.com/hook", EnabledEvents: []string{"*"}, Description: "someone else"}),
			// Same namespace and name, but another cluster's marker: not ours to touch.
			t.srv.Seed(t.apiKey, fake.Endpoint{URL: "https://hooks.example.com/other-cluster", EnabledEvents: []string{"invoice.paid"},
				Metadata: stripe.MarkerMetadata(providers.Owner{Cluster: "prod-eu", Namespace: t.ns, Name: "orders", UID: "0000"}, "k")}),
			t.srv.Seed(t.apiKey, fake.Endpoint{URL: "https://hooks.example.com/", EnabledEvents: []string{"charge.failed"}}),
		}
		s := t.sub("orders", "https://hooks.example.com/mine")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		// Let a few resyncs pass.
		Consistently(func(g Gomega) {
			for _, f := range foreign {
				g.Expect(t.requests("", "/v1/webhook_endpoints/"+f.ID)).To(BeEmpty())
			}
		}).WithTimeout(5 * time.Second).Should(Succeed())
		eps := t.endpoints()
		Expect(eps).To(HaveLen(4))
		for _, f := range foreign {
			Expect(eps).To(ContainElement(And(HaveField("ID", f.ID), HaveField("URL", f.URL), HaveField("EnabledEvents", f.EnabledEvents))))
		}
	})

	It("h: a changed URL gets a new registration, the old one is removed and the Secret follows", func() {
		t := newTenant()
		s, _, _ := expectURLChangeFollowed(t)
		Eventually(func(g Gomega) {
			g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(t.endpoints()[0].Secret))
		}).Should(Succeed())
		expectReady(s)
	})

	It("i: rides out a 429 storm as RateLimited and ends Ready with no duplicate", func() {
		t := newTenant()
		remove := t.srv.Inject(fake.Fault{Method: "POST", PathPrefix: "/v1/webhook_endpoints", Status: 429, Type: "invalid_request_error", Code: "rate_limit",
			Message: "Too many requests hit the API too quickly.", RetryAfter: time.Second, Times: 4})
		defer remove()
		s := t.sub("orders", "https://hooks.example.com/storm")
		expectRateLimitedThenReady(s)
		Expect(t.endpoints()).To(HaveLen(1))
	})

	It("j: deletion honours the policy, and missing credentials block it visibly", func() {
		expectDeletionPolicies(newTenant())
	})

	It("l: an endpoint whose URL and events were edited in the dashboard is repaired in place, same id", func() {
		t := newTenant()
		expectMovedOutOfBandRepaired(t, t.creates, true, func(id string) {
			Expect(t.srv.Edit(t.apiKey, id, func(e *fake.Endpoint) {
				e.URL, e.EnabledEvents = "https://elsewhere.example.com/hooks", []string{"charge.refunded"}
			})).To(BeTrue())
		})
	})

	It("k: a signing Secret deleted by a user is restored by replay, or rotated make-before-break when replay is no longer possible", func() {
		t := newTenant()
		s := t.sub("orders", "https://hooks.example.com/secret")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		id := expectReady(s).Status.EndpointID
		secret := t.endpoints()[0].Secret

		deleteSigningSecret(s)
		Eventually(func(g Gomega) {
			g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(secret))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(t.endpoints()).To(HaveLen(1))
		Expect(t.endpoints()[0].ID).To(Equal(id), "restored by replay: same endpoint")
		Eventually(func(g Gomega) { g.Expect(hasEvent(g, s, hookv1.ReasonSecretRecovered, id)).To(BeTrue()) }).Should(Succeed())

		// Secret lost while the spec changes: the replay still matches the original create, so
		// the secret comes back first and the drift is then fixed in place on the same endpoint.
		// Suspended meanwhile, so one reconcile sees both changes at once.
		setSuspend := func(v bool) {
			Eventually(func(g Gomega) {
				cur := get(g, s)
				cur.Spec.Suspend = v
				if !v {
					cur.Spec.Events = []string{"invoice.paid", "charge.refunded"}
				}
				g.Expect(k8s.Update(suiteCtx, cur)).To(Succeed())
			}).Should(Succeed())
		}
		setSuspend(true)
		// The status says when the manager has seen the suspension; deleting the Secret before
		// that races with a reconcile still under way.
		expectSuspended(s)
		deleteSigningSecret(s)
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKey{Namespace: t.ns, Name: "orders-signing"}, &corev1.Secret{}))
		}).WithTimeout(time.Second).Should(BeTrue(), "a suspended subscription is left alone")
		setSuspend(false)
		Eventually(func(g Gomega) {
			eps := t.endpoints()
			g.Expect(eps).To(HaveLen(1))
			g.Expect(eps[0].ID).To(Equal(id), "restored and updated in place, not rotated")
			g.Expect(eps[0].EnabledEvents).To(ConsistOf("invoice.paid", "charge.refunded"))
			g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(secret))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		expectReady(s)

		// Past the idempotency window the secret cannot be read back: rotate.
		t.srv.ExpireIdempotencyKeys()
		deleteSigningSecret(s)
		Eventually(func(g Gomega) {
			eps := t.endpoints()
			g.Expect(eps).To(HaveLen(1))
			g.Expect(eps[0].ID).NotTo(Equal(id))
			sec := signingSecret(g, s)
			g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(eps[0].Secret))
			g.Expect(get(g, s).Status.EndpointID).To(Equal(eps[0].ID))
			g.Expect(hasEvent(g, s, hookv1.ReasonSecretRotated, eps[0].ID)).To(BeTrue())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		expectReady(s)
	})

	It("n: two replicas with leader election register once, and the standby takes over", func() {
		t := newTenant()
		mgr.Stop()
		defer func() { mgr = startManager(managerOptions{}) }()
		replicas := []*runningManager{
			startManager(managerOptions{leaderElection: true}),
			startManager(managerOptions{leaderElection: true}),
		}
		s := t.sub("orders", "https://hooks.example.com/replicas")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		id := expectReady(s).Status.EndpointID
		Expect(t.endpoints()).To(HaveLen(1))
		Consistently(t.creates).WithTimeout(3*time.Second).Should(Equal(1), "the standby does not reconcile")

		// The first replica goes away (the leader or not); the survivor serves the next change.
		replicas[0].Stop()
		Eventually(func(g Gomega) {
			cur := get(g, s)
			cur.Spec.Description = "served by the survivor"
			g.Expect(k8s.Update(suiteCtx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(t.endpoints()).To(ConsistOf(And(HaveField("ID", id), HaveField("Description", "served by the survivor"))))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		expectReady(s)
		Expect(t.creates()).To(Equal(1))
		replicas[1].Stop()
	})

	It("creates a disabled registration disabled, and toggles it in place", func() {
		t := newTenant()
		s := t.sub("paused", "https://hooks.example.com/paused")
		s.Spec.Disabled = true
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		id := expectReady(s).Status.EndpointID
		Expect(t.endpoints()).To(ConsistOf(And(HaveField("ID", id), HaveField("Status", "disabled"))))
		Eventually(func(g Gomega) {
			cur := get(g, s)
			cur.Spec.Disabled = false
			g.Expect(k8s.Update(suiteCtx, cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(t.endpoints()).To(ConsistOf(And(HaveField("ID", id), HaveField("Status", "enabled"))))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(t.creates()).To(Equal(1))
	})

	It("registers the bundled receiver's URL for spec.endpoint.receiver", func() {
		t := newTenant()
		s := t.sub("orders", "")
		s.Spec.Endpoint = hookv1.EndpointSpec{Receiver: &hookv1.ReceiverEndpoint{}}
		s.Spec.Delivery = &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: "http://orders-worker.shop.svc/events"}}
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		got := expectReady(s)
		want := "https://hooks.example.com/base/hooks/" + t.ns + "/orders"
		Expect(got.Status.URL).To(Equal(want))
		Expect(got.Spec.Delivery.MaxAttempts).To(Equal(int32(10)), "defaulted")
		Expect(got.Spec.Delivery.DedupeWindow.Duration).To(Equal(72*time.Hour), "defaulted")
		eps := t.endpoints()
		Expect(eps).To(HaveLen(1))
		Expect(eps[0].URL).To(Equal(want))
	})

	It("bad input: missing credentials, a 4xx from the provider", func() {
		t := newTenant()
		s := t.sub("nocreds", "https://hooks.example.com/nocreds")
		s.Spec.Provider.CredentialsRef = hookv1.SecretKeySelector{Name: "missing", Key: "token"}
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		Eventually(func(g Gomega) {
			got := get(g, s)
			c := condition(got, hookv1.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsNotFound))
			g.Expect(c.Message).To(ContainSubstring(t.ns + "/missing"))
			g.Expect(condition(got, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())

		badKey := t.sub("wrongkey", "https://hooks.example.com/nocreds")
		badKey.Spec.Provider.CredentialsRef.Key = "nope"
		Expect(k8s.Create(suiteCtx, badKey)).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(get(g, badKey), hookv1.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(hookv1.ReasonCredentialsNotFound))
			g.Expect(c.Message).To(ContainSubstring(`"nope"`))
		}).Should(Succeed())

		remove := t.srv.Inject(fake.Fault{Method: "POST", PathPrefix: "/v1/webhook_endpoints", Status: 400, Type: "invalid_request_error", Code: "url_invalid", Message: "Invalid URL: must be publicly accessible."})
		defer remove()
		rejected := t.sub("rejected", "https://hooks.example.com/rejected")
		Expect(k8s.Create(suiteCtx, rejected)).To(Succeed())
		Eventually(func(g Gomega) {
			c := condition(get(g, rejected), hookv1.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(hookv1.ReasonProviderRejected))
			g.Expect(c.Message).To(ContainSubstring("Invalid URL: must be publicly accessible."))
		}).Should(Succeed())
		Expect(t.endpoints()).To(BeEmpty())
	})

	DescribeTable("l: CEL rules reject bad objects with a message naming the field",
		func(mutate func(s *hookv1.WebhookSubscription), want string) {
			t := &tenant{ns: "default", srvURL: stripeURL}
			s := t.sub(fmt.Sprintf("cel-%d", time.Now().UnixNano()), "https://hooks.example.com/x")
			mutate(s)
			err := k8s.Create(suiteCtx, s)
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("no events", func(s *hookv1.WebhookSubscription) { s.Spec.Events = nil }, "spec.events"),
		Entry("http without opt-in", func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.URL = "http://hooks.example.com/x" }, "allowInsecureHTTP"),
		Entry("userinfo", func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.URL = "https://user:pw@hooks.example.com/x" }, "must not contain credentials"),
		Entry("fragment", func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.URL = "https://hooks.example.com/x#frag" }, "must not contain a fragment"),
		Entry("not a URL scheme", func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.URL = "ftp://hooks.example.com/x" }, "spec.endpoint.url must use https"),
		Entry("relative URL", func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.URL = "/hooks/x" }, "spec.endpoint.url"),
		Entry("star with others", func(s *hookv1.WebhookSubscription) { s.Spec.Events = []string{"*", "invoice.paid"} }, "list it alone"),
		Entry("unknown provider", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.Type = "paypal" }, "spec.provider.type"),
		Entry("resync too short", func(s *hookv1.WebhookSubscription) {
			s.Spec.ResyncInterval = &metav1.Duration{Duration: time.Millisecond}
		}, "spec.resyncInterval must be at least 1s"),
		Entry("apiURL not http", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.APIURL = "localhost:12111" }, "spec.provider.apiURL must be an http(s) URL"),
		Entry("no signing secret name", func(s *hookv1.WebhookSubscription) { s.Spec.SigningSecret.Name = "" }, "spec.signingSecret.name"),
		Entry("bad policy", func(s *hookv1.WebhookSubscription) { s.Spec.Policies.Deletion = "Sometimes" }, "spec.policies.deletion"),
		Entry("url and receiver", func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.Receiver = &hookv1.ReceiverEndpoint{} }, "set exactly one of url or receiver"),
		Entry("neither url nor receiver", func(s *hookv1.WebhookSubscription) { s.Spec.Endpoint.URL = "" }, "set exactly one of url or receiver"),
		Entry("sink not a URL", func(s *hookv1.WebhookSubscription) {
			s.Spec.Delivery = &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: "orders-worker:8080"}}
		}, "spec.delivery.sink.url must be an absolute http(s) URL"),
		Entry("zero attempts", func(s *hookv1.WebhookSubscription) {
			s.Spec.Delivery = &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: "http://w/"}, MaxAttempts: -1}
		}, "spec.delivery.maxAttempts"),
		Entry("dedupe window too short", func(s *hookv1.WebhookSubscription) {
			s.Spec.Delivery = &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: "http://w/"}, DedupeWindow: &metav1.Duration{Duration: time.Second}}
		}, "spec.delivery.dedupeWindow must be at least 1m"),
	)

	It("m: 50 subscriptions on one account share one list per resync wave, as one subscription does", func() {
		// Two accounts measured over the same waves: one with 50 subscriptions, one with 1.
		big := fake.New(fake.WithPageSize(20), fake.WithMaxEndpoints(100))
		url, stop := big.Start()
		defer stop()
		small := fake.New(fake.WithPageSize(20))
		smallURL, stopSmall := small.Start()
		defer stopSmall()
		// Earlier scenarios' subscriptions would share the manager's CPU: suspend them so the
		// figures measure these accounts alone.
		var others hookv1.WebhookSubscriptionList
		Expect(k8s.List(suiteCtx, &others)).To(Succeed())
		for i := range others.Items {
			o := &others.Items[i]
			patch := client.MergeFrom(o.DeepCopy())
			o.Spec.Suspend = true
			Expect(client.IgnoreNotFound(k8s.Patch(suiteCtx, o, patch))).To(Succeed())
		}
		const interval = 3 * time.Second
		create := func(t *tenant, n int) {
			for i := 0; i < n; i++ {
				s := t.sub(fmt.Sprintf("sub-%02d", i), fmt.Sprintf("https://hooks.example.com/m/%02d", i))
				s.Spec.ResyncInterval = &metav1.Duration{Duration: interval}
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				defer expectReady(s)
			}
		}
		many, one := newTenantOn(big, url), newTenantOn(small, smallURL)
		create(many, 50)
		create(one, 1)
		Expect(many.endpoints()).To(HaveLen(50))
		Expect(one.endpoints()).To(HaveLen(1))

		// Let one wave pass so every subscription is on its account's rhythm, then measure
		// whole waves; the providers must see no write meanwhile.
		noWrites := func(g Gomega) {
			for _, t := range []*tenant{many, one} {
				g.Expect(t.requests("POST", "")).To(BeEmpty())
				g.Expect(t.requests("DELETE", "")).To(BeEmpty())
			}
		}
		reset := func() { big.ResetRequests(); small.ResetRequests() }
		reset()
		Consistently(noWrites).WithTimeout(interval).Should(Succeed())
		reset()
		const waves = 4
		Consistently(noWrites).WithTimeout(waves * interval).Should(Succeed())

		report := func(t *tenant, n int) float64 {
			var at []string
			for _, r := range t.listCalls() {
				at = append(at, r.Time.Format("05.000"))
			}
			lists, pages := len(at), len(t.requests("GET", "/v1/webhook_endpoints"))
			perWave := float64(lists) / waves
			fmt.Printf("\nREPORT m: %2d subscription(s) on one account, %d waves of %s: %d list calls (%.2f per wave, %d page(s) each) at s.ms %v\n",
				n, waves, interval, lists, perWave, pages/max(lists, 1), at)
			return perWave
		}
		perWaveMany, perWaveOne := report(many, 50), report(one, 1)
		// The window's edges may cut a wave on either account: allow one list each way.
		Expect(perWaveMany*waves).To(BeNumerically("<=", perWaveOne*waves+2), "list calls must not grow with the number of subscriptions")
		Expect(perWaveMany).To(BeNumerically(">=", 0.5), "the account is still re-read every wave")
	})

	It("never writes an API key or a signing secret into logs, events or status", func() {
		// Every API key the tests used and every signing secret the fake ever issued.
		secrets := map[string]bool{}
		var all corev1.SecretList
		Expect(k8s.List(suiteCtx, &all)).To(Succeed())
		for _, c := range all.Items {
			for _, v := range c.Data {
				if s := strings.TrimSpace(string(v)); strings.HasPrefix(s, "sk_test_") || strings.HasPrefix(s, "whsec_") {
					secrets[s] = true
				}
			}
		}
		expectSecretsNeverShown(secrets)
	})
})

var errSimulatedCrash = errors.New("simulated crash after the provider answered the create")

// expectSecretsNeverShown fails if any of secrets appears in the manager's logs, in any
// subscription's status or in any Event.
func expectSecretsNeverShown(secrets map[string]bool) {
	Expect(len(secrets)).To(BeNumerically(">", 10), "the check must have secrets to look for")

	var subs hookv1.WebhookSubscriptionList
	Expect(k8s.List(suiteCtx, &subs)).To(Succeed())
	var evs corev1.EventList // events.k8s.io Events are served here too
	Expect(k8s.List(suiteCtx, &evs)).To(Succeed())
	Expect(evs.Items).NotTo(BeEmpty())
	haystacks := map[string]string{"manager logs": logs.String()}
	for _, s := range subs.Items {
		haystacks["status of "+s.Namespace+"/"+s.Name] = fmt.Sprintf("%+v", s.Status)
	}
	for _, e := range evs.Items {
		haystacks["event "+e.Namespace+"/"+e.Name] = e.Reason + " " + e.Message
	}
	Expect(haystacks["manager logs"]).To(ContainSubstring("Reconcil"))
	for where, text := range haystacks {
		for sec := range secrets {
			Expect(strings.Contains(text, sec)).To(BeFalse(), "a secret (%s...) leaked into %s", sec[:8], where)
		}
	}
}

func hasEventNow(s *hookv1.WebhookSubscription, reason, substr string) bool {
	found := false
	Eventually(func(g Gomega) {
		found = hasEvent(g, s, reason, substr)
		g.Expect(found).To(BeTrue())
	}).Should(Succeed())
	return found
}
