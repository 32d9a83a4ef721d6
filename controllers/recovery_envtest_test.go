package controllers_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/builtin"
)

// Recovery in a real manager: the Stripe provider (its fake) wrapped by an in-test Recoverer
// per tenant, so each recovery mode runs through the reconciler, the API server and an HTTP
// endpoint; the providers' own Recoverers are tested in their packages.

// envRecovery is one tenant's recovery provider: what it reports missed and how deliveries go.
type envRecovery struct {
	mu          sync.Mutex
	caps        providers.RecoveryCapabilities
	log         []providers.Missed
	health      *providers.DeliveryHealth
	redelivered []string
	rangeSince  []time.Time
}

func (e *envRecovery) setHealth(h *providers.DeliveryHealth) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.health = h
}

func (e *envRecovery) snapshot() (redelivered []string, ranges int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.redelivered), len(e.rangeSince)
}

// recoveringClient is a provider client with the tenant's recovery on top.
type recoveringClient struct {
	providers.Client
	rec *envRecovery
}

func (c recoveringClient) Capabilities() providers.Capabilities {
	caps := c.Client.Capabilities()
	caps.Recovery = c.rec.caps
	return caps
}

func (c recoveringClient) Missed(_ context.Context, _ providers.Registration, events []string, since time.Time, _ int) (providers.MissedPage, error) {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	var page providers.MissedPage
	for _, m := range c.rec.log {
		if !m.At.Before(since) && slices.Contains(events, m.Type) && !slices.Contains(c.rec.redelivered, m.ID) {
			page.Missed = append(page.Missed, m)
		}
	}
	return page, nil
}

func (c recoveringClient) Redeliver(_ context.Context, _ providers.Registration, m providers.Missed) error {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	c.rec.redelivered = append(c.rec.redelivered, m.ID)
	return nil
}

func (c recoveringClient) RecoverSince(_ context.Context, _ providers.Registration, since time.Time) error {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	c.rec.rangeSince = append(c.rec.rangeSince, since)
	return nil
}

func (c recoveringClient) Health(context.Context, providers.Registration) (providers.DeliveryHealth, error) {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	if c.rec.health == nil {
		return providers.DeliveryHealth{}, nil
	}
	return *c.rec.health, nil
}

func (c recoveringClient) SignDelivery(payload []byte, secret string, _ time.Time) (http.Header, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Test-Signature", envSignature(payload, secret))
	return h, nil
}

func envSignature(payload []byte, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(payload)
	return hex.EncodeToString(m.Sum(nil))
}

// recoveryRegistry is the builtin registry with Stripe's clients wrapped for the tenants in
// recs (by API key); other tenants get the plain client.
func recoveryRegistry(recs *sync.Map) providers.Registry {
	reg := builtin.Registry()
	stripe := reg["stripe"]
	inner := stripe.Factory
	stripe.Factory = providers.FactoryFunc(func(cfg providers.Config) (providers.Client, error) {
		c, err := inner.New(cfg)
		if err != nil {
			return nil, err
		}
		if rec, ok := recs.Load(cfg.Credential); ok {
			return recoveringClient{Client: c, rec: rec.(*envRecovery)}, nil
		}
		return c, nil
	})
	reg["stripe"] = stripe
	return reg
}

// envEndpoint is the registration's endpoint: 202 for a new event id, 200 for one it holds,
// and a GET (the manager's reachability probe) answered 405 as a POST-only route.
type envEndpoint struct {
	mu       sync.Mutex
	ledger   map[string]bool
	bodies   map[string][]byte
	headers  map[string]http.Header
	received []string
}

func newEnvEndpoint() (*envEndpoint, string) {
	e := &envEndpoint{ledger: map[string]bool{}, bodies: map[string][]byte{}, headers: map[string]http.Header{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var ev struct{ ID string }
		_ = json.Unmarshal(body, &ev)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.received = append(e.received, ev.ID)
		e.bodies[ev.ID], e.headers[ev.ID] = body, r.Header.Clone()
		if e.ledger[ev.ID] {
			w.WriteHeader(http.StatusOK)
			return
		}
		e.ledger[ev.ID] = true
		w.WriteHeader(http.StatusAccepted)
	}))
	DeferCleanup(srv.Close)
	return e, srv.URL
}

func (e *envEndpoint) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.received)
}

func annotate(s *hookv1.WebhookSubscription, key, value string) {
	Eventually(func(g Gomega) {
		cur := get(g, s)
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[key] = value
		g.Expect(k8s.Patch(suiteCtx, cur, patch)).To(Succeed())
	}).Should(Succeed())
}

var _ = Describe("Recovery of missed deliveries", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	recs := &sync.Map{}
	BeforeAll(func() { mgr = startManager(managerOptions{registry: recoveryRegistry(recs)}) })
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})
	recoveringTenant := func(rec *envRecovery) *tenant {
		t := newTenant()
		recs.Store(t.apiKey, rec)
		return t
	}
	missed := func(id, typ string, ago time.Duration) providers.Missed {
		return providers.Missed{ID: id, Type: typ, At: time.Now().Add(-ago).Truncate(time.Second), Payload: []byte(`{"id":"` + id + `","type":"` + typ + `"}`)}
	}

	It("fetch: each missed event of the subscription's types reaches the endpoint once, signed with the stored secret", func() {
		rec := &envRecovery{caps: providers.RecoveryCapabilities{Mode: providers.RecoveryFetch, Window: 720 * time.Hour}, log: []providers.Missed{
			missed("evt_1", "invoice.paid", 2*time.Hour),
			missed("evt_2", "invoice.paid", time.Hour),
			missed("evt_elsewhere", "customer.created", 90*time.Minute), // not this subscription's type
		}}
		t := recoveringTenant(rec)
		ep, url := newEnvEndpoint()
		ep.ledger["evt_2"] = true // it had arrived after all
		s := t.sub("fetched", url+"/hooks/shop/fetched")
		s.Spec.Endpoint.AllowInsecureHTTP = true
		s.Spec.Recovery.Lookback = &metav1.Duration{Duration: 2000 * time.Hour}
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		Eventually(func(g Gomega) {
			got := get(g, s)
			st := got.Status.Recovery
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.Available).To(BeTrue())
			g.Expect(st.Window).To(Equal("720h"))
			g.Expect(st.LookbackClamped).To(Equal("lookback 2000h is longer than the 720h stripe keeps; clamped to 720h"))
			g.Expect(st.LastRun).NotTo(BeNil())
			g.Expect(st.LastRun.Trigger).To(Equal(hookv1.TriggerAuto))
			g.Expect(st.LastRun.Result).To(Equal(hookv1.RecoverySucceeded), st.LastRun.Message)
			g.Expect(st.Recovered).To(BeEquivalentTo(1))
			g.Expect(st.Skipped).To(BeNumerically(">=", 1))
			g.Expect(st.Watermark).NotTo(BeNil())
			g.Expect(st.Watermark.Time).To(BeTemporally(">=", st.LastRun.StartTime.Time.Truncate(time.Second)))
			d := condition(got, hookv1.ConditionDelivering)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Reason).To(Equal(hookv1.ReasonUnknown))
			g.Expect(d.Status).To(Equal(metav1.ConditionUnknown))
		}).Should(Succeed())
		// evt_1 was accepted once; the runs after the first start at the watermark, past it.
		Expect(ep.got()).To(ContainElements("evt_1", "evt_2"))
		Expect(ep.got()).NotTo(ContainElement("evt_elsewhere"))
		Consistently(func() int {
			n := 0
			for _, id := range ep.got() {
				if id == "evt_1" {
					n++
				}
			}
			return n
		}).WithTimeout(5 * time.Second).Should(Equal(1))
		Eventually(func(g Gomega) {
			secret := string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])
			ep.mu.Lock()
			defer ep.mu.Unlock()
			g.Expect(ep.headers["evt_1"].Get("Test-Signature")).To(Equal(envSignature(ep.bodies["evt_1"], secret)))
		}).Should(Succeed())
		Expect(hasEventNow(s, hookv1.ReasonRecoveryCompleted, "recovered 1")).To(BeTrue())
		got := get(Default, s)
		Expect(condition(got, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "Ready keeps meaning the registration matches")
	})

	It("redeliver: the provider's report of failing deliveries is Delivering Failing, and a run asks for each missed one", func() {
		rec := &envRecovery{caps: providers.RecoveryCapabilities{Mode: providers.RecoveryRedeliver, Window: 72 * time.Hour},
			health: &providers.DeliveryHealth{State: providers.HealthFailing, Failed: 2, Total: 2, Message: "last response 502"},
			log:    []providers.Missed{missed("d1", "invoice.paid", 3*time.Hour), missed("d2", "invoice.paid", 2*time.Hour)}}
		t := recoveringTenant(rec)
		_, url := newEnvEndpoint()
		s := t.sub("redelivered", url+"/hooks/shop/redelivered")
		s.Spec.Endpoint.AllowInsecureHTTP = true
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		Eventually(func(g Gomega) {
			got := get(g, s)
			d := condition(got, hookv1.ConditionDelivering)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(d.Reason).To(Equal(hookv1.ReasonFailing))
			g.Expect(d.Message).To(ContainSubstring("2 of 2 recent deliveries failed"))
			g.Expect(d.Message).To(ContainSubstring("last response 502"))
			g.Expect(got.Status.Recovery.Recovered).To(BeEquivalentTo(2))
			g.Expect(condition(got, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(got, hookv1.ConditionReconciling)).To(BeNil(), "Delivering never makes the object Reconciling")
		}).Should(Succeed())
		redelivered, _ := rec.snapshot()
		Expect(redelivered).To(Equal([]string{"d1", "d2"}))
		Expect(kstatus(s)).To(Equal(status.CurrentStatus), "Delivering False leaves kstatus Current")

		rec.setHealth(&providers.DeliveryHealth{State: providers.HealthDisabled, Message: "disabled after 40 failures"})
		Eventually(func(g Gomega) {
			d := condition(get(g, s), hookv1.ConditionDelivering)
			g.Expect(d.Reason).To(Equal(hookv1.ReasonDisabledByProvider))
			g.Expect(d.Status).To(Equal(metav1.ConditionFalse))
		}).Should(Succeed())
		rec.setHealth(&providers.DeliveryHealth{State: providers.HealthHealthy, Total: 5})
		Eventually(func(g Gomega) {
			got := get(g, s)
			d := condition(got, hookv1.ConditionDelivering)
			g.Expect(d.Reason).To(Equal(hookv1.ReasonHealthy))
			g.Expect(d.Status).To(Equal(metav1.ConditionTrue))
			// Everything is confirmed delivered: the provider lists nothing missed.
			g.Expect(got.Status.Recovery.Watermark).NotTo(BeNil())
		}).Should(Succeed())
	})

	It("range, Manual: nothing runs until the annotation asks; the request is recorded once handled", func() {
		rec := &envRecovery{caps: providers.RecoveryCapabilities{Mode: providers.RecoveryRange, Window: 14 * 24 * time.Hour},
			health: &providers.DeliveryHealth{State: providers.HealthFailing}}
		t := recoveringTenant(rec)
		_, url := newEnvEndpoint()
		s := t.sub("ranged", url+"/hooks/shop/ranged")
		s.Spec.Endpoint.AllowInsecureHTTP = true
		s.Spec.Recovery.Mode = hookv1.RecoveryManual
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		Consistently(func() int { _, n := rec.snapshot(); return n }).WithTimeout(4 * time.Second).Should(BeZero())
		Expect(get(Default, s).Status.Recovery.LastRun).To(BeNil())

		annotate(s, hookv1.AnnotationRecoverRequestedAt, "2026-12-02T10:00:00Z")
		Eventually(func(g Gomega) {
			st := get(g, s).Status.Recovery
			g.Expect(st.LastHandledRequestedAt).To(Equal("2026-12-02T10:00:00Z"))
			g.Expect(st.LastRun).NotTo(BeNil())
			g.Expect(st.LastRun.Trigger).To(Equal(hookv1.TriggerRequested))
			g.Expect(st.LastRun.Result).To(Equal(hookv1.RecoverySucceeded))
			g.Expect(st.LastRun.CompletionTime).NotTo(BeNil())
			g.Expect(st.LastRun.Message).To(ContainSubstring("asked the provider to resend everything since"))
		}).Should(Succeed())
		Consistently(func() int { _, n := rec.snapshot(); return n }).WithTimeout(3*time.Second).Should(Equal(1), "one request, one run")
	})

	It("Off refuses a request with a message; a provider without recovery says so", func() {
		rec := &envRecovery{caps: providers.RecoveryCapabilities{Mode: providers.RecoveryRange, Window: time.Hour}}
		t := recoveringTenant(rec)
		s := t.sub("off", "https://hooks.example.com/off")
		s.Spec.Recovery.Mode = hookv1.RecoveryOff
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		annotate(s, hookv1.AnnotationRecoverRequestedAt, "1")
		Eventually(func(g Gomega) {
			st := get(g, s).Status.Recovery
			g.Expect(st.LastHandledRequestedAt).To(Equal("1"))
			g.Expect(st.Message).To(Equal("recovery was requested but spec.recovery.mode is Off: nothing was run"))
			g.Expect(st.LastRun).To(BeNil())
		}).Should(Succeed())
		_, n := rec.snapshot()
		Expect(n).To(BeZero())

		none := recoveringTenant(&envRecovery{})
		n2 := none.sub("none", "https://hooks.example.com/none")
		Expect(k8s.Create(suiteCtx, n2)).To(Succeed())
		expectReady(n2)
		Eventually(func(g Gomega) {
			st := get(g, n2).Status.Recovery
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.Available).To(BeFalse())
			g.Expect(st.Message).To(Equal("recovery is not available on this provider profile (no recover section)"))
		}).Should(Succeed())
	})
})
