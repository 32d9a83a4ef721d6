package controllers_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers/builtin"
	"github.com/hookwarden/hookwarden/providers/github"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
)

// The GitHub App scenarios run the manager against the fake GitHub's App routes: one webhook per
// App, reached with a JSON web token the manager signs with the App's private key, events set
// in the App's settings only. Each scenario has its own App (its own id and key) and namespace;
// the fake's request log names the App each JWT claims to be from.

// appSeq numbers the scenarios' Apps.
var appSeq int64 = 900000

// ghApp is one scenario's App: its id, key, webhook and namespace.
type ghApp struct {
	id     int64
	hookID int64
	key    *rsa.PrivateKey
	ns     string
	srv    *ghfake.Server
	apiURL string
}

func newGHApp(events ...string) *ghApp { return newGHAppOn(ghSrv, ghURL, events...) }

// newGHAppOn is newGHApp at another fake GitHub (srv, at apiURL).
func newGHAppOn(srv *ghfake.Server, apiURL string, events ...string) *ghApp {
	tenantMu.Lock()
	appSeq++
	id := appSeq
	tenantMu.Unlock()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	Expect(err).NotTo(HaveOccurred())
	a := &ghApp{id: id, key: key, ns: fmt.Sprintf("ghapp%d-%d", id, time.Now().UnixNano()%100000), srv: srv, apiURL: apiURL}
	a.hookID = srv.AddApp(id, "", &key.PublicKey, events...)
	Expect(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: a.ns}})).To(Succeed())
	a.writeKey(pemKey(key))
	return a
}

func pemKey(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

// writeKey stores the App's private key under the key the App's credential defaults to.
func (a *ghApp) writeKey(pemText string) {
	Expect(k8s.Create(suiteCtx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "github-app"},
		StringData: map[string]string{github.AppCredentialKey: pemText},
	})).To(Succeed())
}

// sub is a subscription to the App's webhook; credentialsRef.key is left to its default.
func (a *ghApp) sub(name, url string) *hookv1.WebhookSubscription {
	return &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: name},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider: hookv1.ProviderSpec{
				Type:           hookv1.ProviderGitHub,
				CredentialsRef: hookv1.SecretKeySelector{Name: "github-app"},
				APIURL:         a.apiURL,
				GitHub:         &hookv1.GitHubTarget{App: &hookv1.GitHubApp{AppID: strconv.FormatInt(a.id, 10)}},
			},
			Endpoint:       hookv1.EndpointSpec{URL: url},
			Events:         []string{"push", "pull_request"},
			SigningSecret:  hookv1.SigningSecretSpec{Name: name + "-signing"},
			ResyncInterval: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
}

func (a *ghApp) hook() ghfake.Hook { return a.srv.AppHook(a.id) }

// requests are the fake's log entries for this App (op "" for all).
func (a *ghApp) requests(op string) []ghfake.Request {
	var out []ghfake.Request
	for _, r := range a.srv.Requests() {
		if r.Target == ghfake.AppTarget(a.id) && (op == "" || r.Op == op) {
			out = append(out, r)
		}
	}
	return out
}

// calls are the App's logged requests from index from to index to of a.requests("").
func (a *ghApp) calls(from, to int) []call {
	var out []call
	for _, r := range a.requests("")[from:to] {
		out = append(out, call{r.Method, r.Path})
	}
	return out
}

func (a *ghApp) patches() int { return len(a.requests(ghfake.OpAppConfigUpdate)) }

// expectSecret waits until the signing Secret holds the App webhook's secret as current, under
// the webhook's id, with nothing pending.
func (a *ghApp) expectSecret(s *hookv1.WebhookSubscription) string {
	var secret string
	Eventually(func(g Gomega) {
		secret = a.hook().Config.Secret
		g.Expect(secret).NotTo(BeEmpty())
		sec := signingSecret(g, s)
		g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(secret))
		g.Expect(string(sec.Data[hookv1.SecretKeyFor(github.AppHookID)])).To(Equal(secret))
		g.Expect(sec.Data).NotTo(HaveKey(hookv1.SecretKeyPending))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return secret
}

// expectBlocked waits until the condition that says why s does not progress (Stalled, else
// Reconciling) has reason and a message saying each of says.
func expectBlocked(s *hookv1.WebhookSubscription, reason string, says ...string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		cur := get(g, s)
		c := condition(cur, hookv1.ConditionStalled)
		if c == nil {
			c = condition(cur, hookv1.ConditionReconciling)
		}
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason))
		for _, part := range says {
			g.Expect(c.Message).To(ContainSubstring(part))
		}
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// expectQuiet checks that a blocked subscription does not hot-loop: over several resyncs, the
// App sees at most a few requests (a loop would send hundreds).
func (a *ghApp) expectQuiet() {
	before := len(a.requests(""))
	Consistently(func() int { return len(a.requests("")) - before }).
		WithTimeout(6*time.Second).WithPolling(500*time.Millisecond).Should(BeNumerically("<=", 8), "no hot loop")
}

var _ = Describe("WebhookSubscription on a GitHub App's webhook", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	BeforeAll(func() { mgr = startManager(managerOptions{}) })
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	It("a: points the App's empty webhook at the endpoint with one PATCH, stores the secret GitHub signs with, and becomes Ready", func() {
		a := newGHApp("push", "pull_request")
		s := a.sub("orders", "https://Hooks.Example.com:443/hooks/app/orders")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		got := expectReady(s)
		h := a.hook()
		Expect(h.Config.URL).To(Equal("https://hooks.example.com/hooks/app/orders"), "set in canonical form")
		Expect(h.Config.ContentType).To(Equal("json"))
		Expect(h.Config.InsecureSSL).To(Equal("0"))
		Expect(got.Status.EndpointID).To(Equal(github.AppHookID))
		Expect(a.patches()).To(Equal(1))
		secret := a.expectSecret(s)
		Expect(condition(got, hookv1.ConditionReadOnlyDrift)).To(BeNil(), "the App's events are the spec's")

		_, err := ghSrv.Deliver(ghfake.AppTarget(a.id), a.hookID, "push", []byte(`{"ref":"refs/heads/main"}`))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { return ghDeliveries.signedWith(strconv.FormatInt(a.hookID, 10), "push", secret) }).Should(BeTrue(),
			"GitHub's delivery verifies with the stored secret")
		Expect(hasEventNow(s, hookv1.ReasonCreated, github.AppHookID)).To(BeTrue())
	})

	It("b: a restarted manager writes nothing to the App", func() {
		a := newGHApp("push", "pull_request")
		s := a.sub("orders", "https://hooks.example.com/hooks/app/restart")
		// No periodic resync in the windows counted: the restart's reconcile is the resync.
		s.Spec.ResyncInterval = &metav1.Duration{Duration: time.Hour}
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		a.expectSecret(s)
		first := settled(func() int { return len(a.requests("")) })
		reportRequests("github-app", "first-reconcile", a.calls(0, first))
		patches, reads := a.patches(), len(a.requests(ghfake.OpAppConfig))
		mgr.Stop()
		mgr = startManager(managerOptions{})
		Eventually(func() int { return len(a.requests(ghfake.OpAppConfig)) }).WithTimeout(20 * time.Second).Should(BeNumerically(">", reads))
		expectReady(s)
		Consistently(a.patches).WithTimeout(5 * time.Second).Should(Equal(patches))
		resync := a.calls(first, settled(func() int { return len(a.requests("")) }))
		reportRequests("github-app", "steady-resync", resync)
		expectReadsOnly(resync)
	})

	It("c: a URL set by hand is a conflict that names why: at the desired URL under adoption Never, and elsewhere whatever the policy; nothing is written", func() {
		a := newGHApp("push", "pull_request")
		Expect(ghSrv.Edit(ghfake.AppTarget(a.id), a.hookID, func(h *ghfake.Hook) {
			h.Config.URL, h.Config.Secret = "https://hooks.example.com/hooks/app/never", "set-by-hand"
		})).To(BeTrue())
		s := a.sub("never", "https://hooks.example.com/hooks/app/never")
		s.Spec.Policies.Adoption = hookv1.AdoptionNever
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectBlocked(s, hookv1.ReasonConflict, "set by hand or by another cluster", "policies.adoption is Never")
		a.expectQuiet()

		b := newGHApp("push", "pull_request")
		Expect(ghSrv.Edit(ghfake.AppTarget(b.id), b.hookID, func(h *ghfake.Hook) { h.Config.URL = "https://ci.example.com/app" })).To(BeTrue())
		s2 := b.sub("elsewhere", "https://hooks.example.com/hooks/app/elsewhere")
		Expect(k8s.Create(suiteCtx, s2)).To(Succeed()) // adoption: Adopt, the default
		expectBlocked(s2, hookv1.ReasonConflict, "https://ci.example.com/app", "whatever policies.adoption says")
		b.expectQuiet()
		Expect(a.patches() + b.patches()).To(Equal(0))
		Expect(a.hook().Config.Secret).To(Equal("set-by-hand"))
		Expect(b.hook().Config.URL).To(Equal("https://ci.example.com/app"))
	})

	It("c2: a webhook pointed by hand at the desired URL is adopted under Adopt with one PATCH setting our secret, and the Events say so", func() {
		a := newGHApp("push", "pull_request")
		const url = "https://hooks.example.com/hooks/app/adopt"
		Expect(ghSrv.Edit(ghfake.AppTarget(a.id), a.hookID, func(h *ghfake.Hook) { h.Config.URL, h.Config.Secret = url, "set-by-hand" })).To(BeTrue())
		s := a.sub("adopt", url) // adoption: Adopt, the default
		got := createReady(s)
		secret := a.expectSecret(s)
		Expect(secret).NotTo(Equal("set-by-hand"), "the hand-set secret is not held: replaced by ours")
		Expect(a.hook().Config.URL).To(Equal(url))
		Expect(got.Status.EndpointID).To(Equal(github.AppHookID))
		Expect(a.patches()).To(Equal(1))
		Eventually(func(g Gomega) {
			g.Expect(hasEvent(g, s, hookv1.ReasonAdopted, "adopted "+github.AppHookID+", which serves "+url)).To(BeTrue())
			g.Expect(hasEvent(g, s, hookv1.ReasonSecretRotated, "was not held; set a new one on it in place")).To(BeTrue())
		}).Should(Succeed())
	})

	It("c3: a crash right after GitHub accepted the PATCH leaves one webhook config, which signs with the stored secret once the manager is back", func() {
		a := newGHApp("push", "pull_request")
		mgr.Stop()
		s := a.sub("crash", "https://hooks.example.com/hooks/app/crash")
		createAndCrash(s)
		Expect(a.patches()).To(Equal(1))
		set := a.hook().Config.Secret
		Expect(string(signingSecret(Default, s).Data[hookv1.SecretKeyPending])).To(Equal(set), "stored (pending) before GitHub heard of it")
		mgr = startManager(managerOptions{})
		expectReady(s)
		secret := a.expectSecret(s)
		Expect(secret).To(Equal(set))
		Expect(a.patches()).To(Equal(2), "the pending secret confirmed by setting it again in place")
		Expect(a.hook().Config.URL).To(Equal("https://hooks.example.com/hooks/app/crash"))
		_, err := ghSrv.Deliver(ghfake.AppTarget(a.id), a.hookID, "push", []byte(`{"ref":"refs/heads/main"}`))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { return ghDeliveries.signedWith(strconv.FormatInt(a.hookID, 10), "push", secret) }).Should(BeTrue())
		reportRequests("github-app", "crash after the PATCH, then a restart", a.calls(0, len(a.requests(""))))
	})

	It("d: events that differ from the App's settings are reported in ReadOnlyDrift, never written, and the condition goes once they agree", func() {
		a := newGHApp("issues", "push")
		s := a.sub("orders", "https://hooks.example.com/hooks/app/events")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		Eventually(func(g Gomega) {
			c := condition(get(g, s), hookv1.ConditionReadOnlyDrift)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(hookv1.ReasonReadOnlyFieldDiffers))
			g.Expect(c.Message).To(ContainSubstring("not subscribed there: [pull_request]"))
			g.Expect(c.Message).To(ContainSubstring("not in spec.events: [issues]"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(a.patches).WithTimeout(5*time.Second).Should(Equal(1), "only the first PATCH: events are never repaired")
		Expect(condition(get(Default, s), hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

		ghSrv.SetAppEvents(a.id, "push", "pull_request")
		Eventually(func(g Gomega) { g.Expect(condition(get(g, s), hookv1.ConditionReadOnlyDrift)).To(BeNil()) }).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(a.patches()).To(Equal(1))
	})

	It("e: a requested rotation is one PATCH with the new secret, which the Secret holds", func() {
		a := newGHApp("push", "pull_request")
		s := a.sub("orders", "https://hooks.example.com/hooks/app/rotate")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		first := a.expectSecret(s)
		w := watchOverlap(s, first)
		annotate(s, hookv1.AnnotationRotateRequestedAt, "2026-12-07T10:00:00Z")
		Eventually(func(g Gomega) {
			g.Expect(a.hook().Config.Secret).NotTo(Equal(first))
			g.Expect(get(g, s).Status.LastHandledRotateAt).To(Equal("2026-12-07T10:00:00Z"))
			g.Expect(hasEvent(g, s, hookv1.ReasonSecretRotated, github.AppHookID)).To(BeTrue())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		rotated := a.expectSecret(s)
		Expect(rotated).NotTo(Equal(first))
		Expect(a.patches()).To(Equal(2), "the create's PATCH and the rotation's")
		w.report("github-app", "one PATCH /app/hook/config sets our new secret in place; GitHub signs with the old one until that PATCH and with the new one after it")
		expectReady(s)
	})

	It("bad input: a private key that does not parse, and a key that is not the App's, each give one clear condition and no hot loop", func() {
		a := newGHApp("push")
		Expect(k8s.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "github-app"}})).To(Succeed())
		a.writeKey("not a key")
		s := a.sub("garbled", "https://hooks.example.com/hooks/app/garbled")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectBlocked(s, hookv1.ReasonInvalidSpec, "private key is not PEM")
		Expect(a.requests("")).To(BeEmpty(), "nothing is sent without a key")

		b := newGHApp("push")
		other, err := rsa.GenerateKey(rand.Reader, 2048)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8s.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "github-app"}})).To(Succeed())
		b.writeKey(pemKey(other))
		s2 := b.sub("foreign-key", "https://hooks.example.com/hooks/app/foreign-key")
		Expect(k8s.Create(suiteCtx, s2)).To(Succeed())
		expectBlocked(s2, hookv1.ReasonUnauthorized, "the App ID and the private key must belong to one App")
		b.expectQuiet()
		Expect(b.hook().Config.URL).To(BeEmpty())
	})

	It("deletion with policy Delete leaves the App's webhook (the API cannot delete it), says where it still delivers, and releases the subscription", func() {
		a := newGHApp("push", "pull_request")
		s := a.sub("orders", "https://hooks.example.com/hooks/app/deleted")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		Expect(k8s.Delete(suiteCtx, s)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKeyFromObject(s), &hookv1.WebhookSubscription{}))
		}).WithTimeout(20 * time.Second).Should(BeTrue())
		Expect(a.hook().Config.URL).To(Equal("https://hooks.example.com/hooks/app/deleted"))
		Eventually(func(g Gomega) {
			g.Expect(hasEvent(g, s, hookv1.ReasonOrphaned, "still delivering to https://hooks.example.com/hooks/app/deleted")).To(BeTrue())
		}).Should(Succeed())
		Expect(a.patches()).To(Equal(1))
	})

	It("recovery: failed deliveries of the App's webhook make Delivering Failing; a requested run redelivers each through …/attempts under its guid, and Delivering follows the newest delivery", func() {
		// An endpoint on loopback that fails while told to (a recovery run checks that the
		// endpoint answers before it asks for redeliveries), at a fake GitHub of this
		// scenario's own (the suite's sink always answers 200).
		var failing atomic.Bool
		var mu sync.Mutex
		var got []string // X-GitHub-Delivery of each delivery received, in order
		ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if r.Method == http.MethodPost {
				mu.Lock()
				got = append(got, r.Header.Get(github.DeliveryHeader))
				mu.Unlock()
			}
			if failing.Load() {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		DeferCleanup(ep.Close)
		srv := ghfake.New(ghfake.WithDeliveries(&http.Client{Timeout: 5 * time.Second}))
		base, stop := srv.Start()
		DeferCleanup(stop)
		a := newGHAppOn(srv, base, "push", "pull_request")
		s := a.sub("orders", ep.URL+"/hooks/app/recovered")
		s.Spec.Endpoint.AllowInsecureHTTP = true
		s.Spec.Recovery.Mode = hookv1.RecoveryManual // the run starts when asked, not while the endpoint still fails
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		a.expectSecret(s)

		failing.Store(true)
		var guids []string
		for _, ref := range []string{"refs/heads/main", "refs/heads/release"} {
			ds, err := srv.Emit(ghfake.AppTarget(a.id), "push", []byte(`{"ref":"`+ref+`","installation":{"id":42}}`))
			Expect(err).NotTo(HaveOccurred())
			Expect(ds).To(HaveLen(1))
			Expect(ds[0].Code).To(Equal(http.StatusInternalServerError))
			guids = append(guids, ds[0].GUID)
		}
		Eventually(func(g Gomega) {
			cur := get(g, s)
			d := condition(cur, hookv1.ConditionDelivering)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(d.Reason).To(Equal(hookv1.ReasonFailing))
			g.Expect(d.Message).To(MatchRegexp(`2 of \d+ recent deliveries failed; last answered 500`))
			g.Expect(cur.Status.Recovery).NotTo(BeNil())
			g.Expect(cur.Status.Recovery.Available).To(BeTrue())
			g.Expect(condition(cur, hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "Ready keeps meaning the webhook matches")
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(a.requests(ghfake.OpRedeliver)).To(BeEmpty(), "Manual: nothing redelivered before the request")

		failing.Store(false)
		before := len(a.requests(""))
		annotate(s, hookv1.AnnotationRecoverRequestedAt, "2026-12-07T12:00:00Z")
		Eventually(func(g Gomega) {
			cur := get(g, s)
			st := cur.Status.Recovery
			g.Expect(st.LastHandledRequestedAt).To(Equal("2026-12-07T12:00:00Z"))
			g.Expect(st.LastRun).NotTo(BeNil())
			g.Expect(st.LastRun.Result).To(Equal(hookv1.RecoverySucceeded), st.LastRun.Message)
			g.Expect(st.Recovered).To(BeEquivalentTo(2))
			d := condition(cur, hookv1.ConditionDelivering)
			g.Expect(d.Status).To(Equal(metav1.ConditionTrue), d.Message)
			g.Expect(d.Reason).To(Equal(hookv1.ReasonHealthy))
			g.Expect(d.Message).To(ContainSubstring("last answered 200"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		run := a.calls(before, settled(func() int { return len(a.requests("")) }))
		reportRequests("github-app", "requested recovery of 2 failed deliveries (then resyncs)", redeliveryCalls(run))
		redelivered := a.requests(ghfake.OpRedeliver)
		Expect(redelivered).To(HaveLen(2), "one POST …/attempts per failed delivery")
		for _, r := range redelivered {
			Expect(r.Path).To(MatchRegexp(`^/app/hook/deliveries/\d+/attempts$`))
		}
		mu.Lock()
		defer mu.Unlock()
		for _, guid := range guids {
			n := 0
			for _, g := range got {
				if g == guid {
					n++
				}
			}
			Expect(n).To(Equal(2), "delivery %s: the failed attempt and its redelivery, under the same guid", guid)
		}
	})
})

// redeliveryCalls names the delivery ids of calls {id}.
func redeliveryCalls(calls []call) []call {
	out := make([]call, len(calls))
	for i, c := range calls {
		if head, tail, ok := strings.Cut(c.path, "/deliveries/"); ok {
			_, rest, _ := strings.Cut(tail, "/")
			c.path = head + "/deliveries/{id}"
			if rest != "" {
				c.path += "/" + rest
			}
		}
		out[i] = c
	}
	return out
}

var _ = It("the shipped GitHub App sample is admitted by the CRD and read as the App's webhook, its key under privateKey", func() {
	raw, err := os.ReadFile(filepath.Join("..", "config", "samples", "github-app", "app.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var s hookv1.WebhookSubscription
	Expect(yaml.Unmarshal(raw, &s)).To(Succeed())
	s.Namespace = "default"
	Expect(k8s.Create(suiteCtx, &s, client.DryRunAll)).To(Succeed())
	_, scope, err := decide.ValidateSpec(&s.Spec, builtin.Registry())
	Expect(err).NotTo(HaveOccurred())
	Expect(scope.Target).To(Equal("app/123456"))
	Expect(scope.CredentialKey).To(Equal(github.AppCredentialKey))
})
