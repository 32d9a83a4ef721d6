package controllers_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/github"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
)

// The GitHub scenarios run the same manager against the stateful fake GitHub, for a repository
// hook and for an organization hook. GitHub stores no ownership marker, chooses no secret (the
// operator does, and GitHub masks it forever) and replays nothing, so where the Stripe scenarios
// lean on markers and idempotent replays these lean on the recorded id, the held secret and the
// pending-secret protocol. Every ping the fake sends after a create is delivered to a local
// endpoint, so the scenarios check the secret the Secret holds against what GitHub signs with.

// ghSink receives the fake GitHub's deliveries, whatever host the hook names.
type ghSink struct {
	mu   sync.Mutex
	got  []ghDelivery
	http *http.Client
}

type ghDelivery struct {
	hookID    string
	event     string
	body      []byte
	signature string
}

func newGHSink() *ghSink {
	s := &ghSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, ghDelivery{hookID: r.Header.Get(github.HookIDHeader), event: r.Header.Get(github.EventHeader), body: body, signature: r.Header.Get(github.SignatureHeader)})
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	DeferCleanup(srv.Close)
	local := srv.Listener.Addr().String()
	// Every hook URL (https://hooks.example.com/...) reaches the local endpoint, over plain HTTP.
	dial := &net.Dialer{Timeout: 5 * time.Second}
	s.http = &http.Client{Timeout: 5 * time.Second, Transport: plainHTTP{&http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dial.DialContext(ctx, network, local)
		},
	}}}
	return s
}

type plainHTTP struct{ next http.RoundTripper }

func (t plainHTTP) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme = "http"
	return t.next.RoundTrip(r)
}

// signedWith reports whether the sink received a delivery for hook id signed with secret.
func (s *ghSink) signedWith(id, event, secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.got {
		if d.hookID == id && d.event == event && d.signature == github.Sign([]byte(secret), d.body) {
			return true
		}
	}
	return false
}

// ghTenant is one test's namespace, token and GitHub target.
type ghTenant struct {
	ns, token, target string
	repo              bool
}

func newGHTenant(repo bool) *ghTenant {
	tenantMu.Lock()
	tenantSeq++
	n := tenantSeq
	tenantMu.Unlock()
	t := &ghTenant{ns: fmt.Sprintf("gh%d-%d", n, time.Now().UnixNano()%100000), token: fmt.Sprintf("ghp_tenant%d_%d", n, time.Now().UnixNano()), repo: repo}
	if repo {
		t.target = fmt.Sprintf("repos/acme-%d/shop", n)
	} else {
		t.target = fmt.Sprintf("orgs/acme-%d", n)
	}
	ghSrv.Grant(t.token, t.target)
	Expect(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.ns}})).To(Succeed())
	t.writeCredentials()
	return t
}

func (t *ghTenant) writeCredentials() {
	Expect(k8s.Create(suiteCtx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "github-api"},
		StringData: map[string]string{"token": t.token},
	})).To(Succeed())
}

func (t *ghTenant) credentials() client.ObjectKey {
	return client.ObjectKey{Namespace: t.ns, Name: "github-api"}
}

func (t *ghTenant) registrations() map[string]string {
	out := map[string]string{}
	for _, h := range t.hooks() {
		out[hookID(h)] = h.Config.URL
	}
	return out
}

func (t *ghTenant) githubTarget() *hookv1.GitHubTarget {
	parts := strings.Split(t.target, "/")
	if t.repo {
		return &hookv1.GitHubTarget{Owner: parts[1], Repository: parts[2]}
	}
	return &hookv1.GitHubTarget{Organization: parts[1]}
}

// sub returns a valid GitHub subscription; the credentials key is left to its default (token).
func (t *ghTenant) sub(name, url string) *hookv1.WebhookSubscription {
	return &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider: hookv1.ProviderSpec{
				Type:           hookv1.ProviderGitHub,
				CredentialsRef: hookv1.SecretKeySelector{Name: "github-api"},
				APIURL:         ghURL,
				GitHub:         t.githubTarget(),
			},
			Endpoint:       hookv1.EndpointSpec{URL: url},
			Events:         []string{"push", "pull_request"},
			SigningSecret:  hookv1.SigningSecretSpec{Name: name + "-signing"},
			ResyncInterval: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
}

func (t *ghTenant) hooks() []ghfake.Hook { return ghSrv.Hooks(t.target) }

func (t *ghTenant) requests(op string) []ghfake.Request {
	label := ghfake.TokenLabel(t.token)
	var out []ghfake.Request
	for _, r := range ghSrv.Requests() {
		if r.Token == label && (op == "" || r.Op == op) {
			out = append(out, r)
		}
	}
	return out
}

func (t *ghTenant) creates() int { return len(t.requests(ghfake.OpCreate)) }

func hookID(h ghfake.Hook) string { return strconv.FormatInt(h.ID, 10) }

// expectGHSecret waits until the signing Secret holds exactly the hook's secret as current,
// under the hook's id, with nothing pending.
func expectGHSecret(s *hookv1.WebhookSubscription, h ghfake.Hook) {
	Eventually(func(g Gomega) {
		cur := ghSrv.Hooks(targetOf(s))
		var secret string
		for _, x := range cur {
			if x.ID == h.ID {
				secret = x.Config.Secret
			}
		}
		g.Expect(secret).NotTo(BeEmpty(), "the hook has a secret")
		sec := signingSecret(g, s)
		g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(secret))
		g.Expect(string(sec.Data[hookv1.SecretKeyFor(hookID(h))])).To(Equal(secret))
		g.Expect(sec.Data).NotTo(HaveKey(hookv1.SecretKeyPending))
		g.Expect(sec.Annotations).To(HaveKeyWithValue(hookv1.AnnotationEndpointID, hookID(h)))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

func targetOf(s *hookv1.WebhookSubscription) string {
	g := s.Spec.Provider.GitHub
	if g.Organization != "" {
		return "orgs/" + g.Organization
	}
	return "repos/" + g.Owner + "/" + g.Repository
}

var _ = Describe("WebhookSubscription on GitHub", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	BeforeAll(func() { mgr = startManager(managerOptions{}) })
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	for _, kind := range []struct {
		name string
		repo bool
	}{{"repository hook", true}, {"organization hook", false}} {
		Context(kind.name, func() {
			newT := func() *ghTenant { return newGHTenant(kind.repo) }

			It("a: registers exactly one hook as GitHub wants it, stores the secret it signs with, pings it and becomes Ready", func() {
				t := newT()
				s := t.sub("orders", "https://Hooks.Example.com:443/hooks/shop/orders")
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				got := expectReady(s)

				hs := t.hooks()
				Expect(hs).To(HaveLen(1))
				h := hs[0]
				Expect(h.Config.URL).To(Equal("https://hooks.example.com/hooks/shop/orders"), "registered in canonical form")
				Expect(h.Config.ContentType).To(Equal("json"))
				Expect(h.Config.InsecureSSL).To(Equal("0"))
				Expect(h.Active).To(BeTrue())
				Expect(h.Events).To(ConsistOf("push", "pull_request"))
				Expect(got.Status.EndpointID).To(Equal(hookID(h)))
				Expect(t.creates()).To(Equal(1))
				expectGHSecret(s, h)
				Eventually(func(g Gomega) {
					st := get(g, s).Status
					g.Expect(st.Ping).NotTo(BeNil())
					g.Expect(st.Ping.EndpointID).To(Equal(hookID(h)))
					g.Expect(st.Ping.Result).To(Equal(hookv1.PingRequested))
				}).Should(Succeed())
				// GitHub's ping reached the endpoint signed with the secret the Secret holds.
				Eventually(func() bool { return ghDeliveries.signedWith(hookID(h), "ping", t.hooks()[0].Config.Secret) }).Should(BeTrue())
				// ... and the next list shows its outcome. GitHub's description has last_response
				// on repository hooks only: for an organization hook nothing is invented.
				if kind.repo {
					Eventually(func(g Gomega) {
						ld := get(g, s).Status.LastDelivery
						g.Expect(ld).NotTo(BeNil())
						g.Expect(ld.Code).To(Equal(int32(200)))
					}).WithTimeout(20 * time.Second).Should(Succeed())
				} else {
					Consistently(func(g Gomega) { g.Expect(get(g, s).Status.LastDelivery).To(BeNil()) }).WithTimeout(3 * time.Second).Should(Succeed())
				}
				Expect(hasEventNow(s, hookv1.ReasonCreated, hookID(h))).To(BeTrue())
			})

			It("b: a restarted manager creates nothing, and resyncs of an unchanged target are 304s", func() {
				t := newT()
				subs := []*hookv1.WebhookSubscription{t.sub("one", "https://hooks.example.com/one"), t.sub("two", "https://hooks.example.com/two")}
				for _, s := range subs {
					Expect(k8s.Create(suiteCtx, s)).To(Succeed())
					expectReady(s)
				}
				creates, lists := t.creates(), len(t.requests(ghfake.OpList))
				mgr.Stop()
				mgr = startManager(managerOptions{})
				Eventually(func() int { return len(t.requests(ghfake.OpList)) }).WithTimeout(20 * time.Second).Should(BeNumerically(">", lists))
				for _, s := range subs {
					expectReady(s)
				}
				Consistently(t.creates).WithTimeout(5 * time.Second).Should(Equal(creates))
				Expect(t.hooks()).To(HaveLen(2))
				var notModified int
				for _, r := range t.requests(ghfake.OpList) {
					if r.NotModified {
						notModified++
					}
				}
				Expect(notModified).To(BeNumerically(">", 0), "unchanged lists are answered 304")
			})

			It("c: a crash after GitHub created the hook leaves one hook, and the Secret ends holding the secret it verifies with", func() {
				t := newT()
				mgr.Stop()
				s := t.sub("orders", "https://hooks.example.com/crash")
				createAndCrash(s)
				hs := t.hooks()
				Expect(hs).To(HaveLen(1), "GitHub created the hook")
				// The secret was stored before GitHub heard of it.
				sec := signingSecret(Default, s)
				Expect(string(sec.Data[hookv1.SecretKeyPending])).To(Equal(hs[0].Config.Secret))

				mgr = startManager(managerOptions{})
				got := expectReady(s)
				hs = t.hooks()
				Expect(hs).To(HaveLen(1), "no second hook after the restart")
				Expect(got.Status.EndpointID).To(Equal(hookID(hs[0])))
				expectGHSecret(s, hs[0])
				Expect(t.creates()).To(Equal(1))
			})

			It("c2: a create whose answer was lost, and one that failed before GitHub saw it, each end with one hook and its secret", func() {
				t := newT()
				lost := ghSrv.Inject(ghfake.Fault{Method: "POST", PathPrefix: "/" + t.target + "/hooks", Status: 502, AfterApply: true, Times: 1})
				defer lost()
				s := t.sub("lost", "https://hooks.example.com/lost")
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				expectReady(s)
				Expect(t.hooks()).To(HaveLen(1))
				expectGHSecret(s, t.hooks()[0])

				failed := ghSrv.Inject(ghfake.Fault{Method: "POST", PathPrefix: "/" + t.target + "/hooks", Status: 500, Times: 1})
				defer failed()
				s2 := t.sub("failed", "https://hooks.example.com/failed")
				Expect(k8s.Create(suiteCtx, s2)).To(Succeed())
				expectReady(s2)
				Expect(t.hooks()).To(HaveLen(2))
				for _, h := range t.hooks() {
					if h.Config.URL == "https://hooks.example.com/failed" {
						expectGHSecret(s2, h)
					}
				}
			})

			It("d: status cleared by hand is taken back by the held secret, without a create", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/cleared")
				s.Spec.Policies.Adoption = hookv1.AdoptionNever // the proof is the secret, not adoption
				expectStatusClearedTakenBack(t, s, t.creates)
			})

			It("e: repairs out-of-band edits: a deleted hook is recreated; events, active, content_type and insecure_ssl are fixed in place", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/oob")
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				old := expectReady(s).Status.EndpointID
				id, _ := strconv.ParseInt(old, 10, 64)
				Expect(ghSrv.Remove(t.target, id)).To(BeTrue())
				var h ghfake.Hook
				Eventually(func(g Gomega) {
					hs := t.hooks()
					g.Expect(hs).To(HaveLen(1))
					g.Expect(hookID(hs[0])).NotTo(Equal(old))
					h = hs[0]
					g.Expect(get(g, s).Status.EndpointID).To(Equal(hookID(h)))
					g.Expect(signingSecret(g, s).Data).NotTo(HaveKey(hookv1.SecretKeyFor(old)), "the deleted hook's secret is no longer accepted")
				}).WithTimeout(20 * time.Second).Should(Succeed())
				expectGHSecret(s, h)

				secret := h.Config.Secret
				creates := t.creates()
				Expect(ghSrv.Edit(t.target, h.ID, func(x *ghfake.Hook) {
					x.Events, x.Active, x.Config.ContentType, x.Config.InsecureSSL = []string{"issues"}, false, "form", "1"
				})).To(BeTrue())
				Eventually(func(g Gomega) {
					hs := t.hooks()
					g.Expect(hs).To(HaveLen(1))
					g.Expect(hs[0].ID).To(Equal(h.ID), "updated in place")
					g.Expect(hs[0].Events).To(ConsistOf("push", "pull_request"))
					g.Expect(hs[0].Active).To(BeTrue())
					g.Expect(hs[0].Config.ContentType).To(Equal("json"))
					g.Expect(hs[0].Config.InsecureSSL).To(Equal("0"))
					g.Expect(hs[0].Config.Secret).To(Equal(secret), "the update resent the secret")
				}).WithTimeout(20 * time.Second).Should(Succeed())
				Expect(t.creates()).To(Equal(creates))
				expectReady(s)
			})

			It("f: prunes proven twins, reports unproven look-alikes and near-twins without touching them", func() {
				t := newT()
				// The bundled receiver's URL proves ownership: a second hook for it is a twin.
				rs := t.sub("orders", "")
				rs.Spec.Endpoint = hookv1.EndpointSpec{Receiver: &hookv1.ReceiverEndpoint{}}
				Expect(k8s.Create(suiteCtx, rs)).To(Succeed())
				kept := expectReady(rs).Status.EndpointID
				receiverHook := "https://hooks.example.com/base/hooks/" + t.ns + "/orders"
				twin := ghSrv.Seed(t.target, ghfake.Hook{Active: true, Events: []string{"issues"}, Config: ghfake.Config{URL: receiverHook, ContentType: "json", Secret: "someone-elses"}})

				// An explicit URL: a hand-made hook for it with other events, and a near-twin.
				es := t.sub("explicit", "https://hooks.example.com/explicit")
				Expect(k8s.Create(suiteCtx, es)).To(Succeed())
				mine := expectReady(es).Status.EndpointID
				lookalike := ghSrv.Seed(t.target, ghfake.Hook{Active: true, Events: []string{"issues"}, Config: ghfake.Config{URL: "https://hooks.example.com/explicit", ContentType: "json"}})
				nearTwin := ghSrv.Seed(t.target, ghfake.Hook{Active: true, Events: []string{"push"}, Config: ghfake.Config{URL: "https://hooks.example.com/explicit/", ContentType: "json"}})

				Eventually(func(g Gomega) {
					var ids []string
					for _, h := range t.hooks() {
						ids = append(ids, hookID(h))
					}
					g.Expect(ids).To(ConsistOf(kept, mine, hookID(lookalike), hookID(nearTwin)))
					g.Expect(get(g, rs).Status.TwinsPruned).To(Equal(int32(1)))
					g.Expect(hasEvent(g, rs, hookv1.ReasonTwinsPruned, hookID(twin))).To(BeTrue())
					c := condition(get(g, es), hookv1.ConditionTwinsFound)
					g.Expect(c).NotTo(BeNil())
					g.Expect(c.Message).To(ContainSubstring(hookID(lookalike)))
					g.Expect(c.Message).To(ContainSubstring(hookID(nearTwin)))
					g.Expect(c.Message).To(ContainSubstring("cannot be proven ours"))
				}).WithTimeout(20 * time.Second).Should(Succeed())
				for _, r := range t.requests("") {
					for _, untouched := range []string{hookID(lookalike), hookID(nearTwin)} {
						Expect(r.Path).NotTo(HaveSuffix("/hooks/"+untouched), "%s %s touched a hook that is not ours", r.Method, r.Path)
					}
				}
				expectReady(es)
			})

			It("g: never changes foreign hooks on the target", func() {
				t := newT()
				foreign := []ghfake.Hook{
					ghSrv.Seed(t.target, ghfake.Hook{Active: true, Events: []string{"*"}, Config: ghfake.Config{URL: "https://ci.example.com/hook", ContentType: "form"}}),
					ghSrv.Seed(t.target, ghfake.Hook{Active: false, Events: []string{"push"}, Config: ghfake.Config{URL: "https://hooks.example.com/", ContentType: "json"}}),
				}
				s := t.sub("orders", "https://hooks.example.com/mine")
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				expectReady(s)
				Consistently(func(g Gomega) {
					for _, r := range t.requests("") {
						for _, f := range foreign {
							g.Expect(r.Path).NotTo(HaveSuffix("/hooks/" + hookID(f)))
						}
					}
				}).WithTimeout(5 * time.Second).Should(Succeed())
				hs := t.hooks()
				Expect(hs).To(HaveLen(3))
				for _, f := range foreign {
					Expect(hs).To(ContainElement(And(HaveField("ID", f.ID), HaveField("Config", f.Config), HaveField("Events", f.Events))))
				}
			})

			It("h: a changed URL gets a new hook, the old one is removed and the Secret follows", func() {
				t := newT()
				s, _, _ := expectURLChangeFollowed(t)
				expectGHSecret(s, t.hooks()[0])
				expectReady(s)
			})

			It("i: rides out GitHub's secondary rate limit as RateLimited and ends Ready with one hook", func() {
				t := newT()
				f := ghfake.SecondaryLimit(403, time.Second)
				f.Method, f.PathPrefix, f.Times = "POST", "/"+t.target+"/hooks", 3
				remove := ghSrv.Inject(f)
				defer remove()
				s := t.sub("orders", "https://hooks.example.com/storm")
				expectRateLimitedThenReady(s)
				Expect(t.hooks()).To(HaveLen(1))
				expectGHSecret(s, t.hooks()[0])
			})

			It("j: deletion honours the policy, and missing credentials block it visibly", func() {
				expectDeletionPolicies(newT())
			})

			It("l: a hook whose URL and events were edited at GitHub is repaired in place, same id", func() {
				t := newT()
				expectMovedOutOfBandRepaired(t, t.creates, true, func(id string) {
					n, _ := strconv.ParseInt(id, 10, 64)
					Expect(ghSrv.Edit(t.target, n, func(h *ghfake.Hook) {
						h.Config.URL, h.Events = "https://elsewhere.example.com/hooks", []string{"issues"}
					})).To(BeTrue())
				})
			})

			It("k: a deleted signing Secret is repaired by setting a new secret on the same hook", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/secret")
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				id := expectReady(s).Status.EndpointID
				old := t.hooks()[0].Config.Secret
				creates := t.creates()
				deleteSigningSecret(s)
				Eventually(func(g Gomega) {
					hs := t.hooks()
					g.Expect(hs).To(HaveLen(1))
					g.Expect(hookID(hs[0])).To(Equal(id), "same hook, in place")
					g.Expect(hs[0].Config.Secret).NotTo(Equal(old), "a new secret")
					g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(hs[0].Config.Secret))
				}).WithTimeout(20 * time.Second).Should(Succeed())
				expectGHSecret(s, t.hooks()[0])
				Expect(t.creates()).To(Equal(creates))
				Eventually(func(g Gomega) { g.Expect(hasEvent(g, s, hookv1.ReasonSecretRotated, id)).To(BeTrue()) }).Should(Succeed())
				expectReady(s)
			})

			It("bad input: a token that cannot administer the target, and a missing target, stall with what to grant; nothing is created or left pending", func() {
				t := newT()
				ghSrv.Revoke(t.token, t.target)
				s := t.sub("denied", "https://hooks.example.com/denied")
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				Eventually(func(g Gomega) {
					c := condition(get(g, s), hookv1.ConditionStalled)
					g.Expect(c).NotTo(BeNil())
					g.Expect(c.Reason).To(Equal(hookv1.ReasonTargetNotFound))
					hint := "admin:org_hook"
					if kind.repo {
						hint = "admin:repo_hook"
					}
					g.Expect(c.Message).To(ContainSubstring(hint))
				}).WithTimeout(20 * time.Second).Should(Succeed())
				Expect(t.hooks()).To(BeEmpty())
				Expect(t.creates()).To(Equal(0))
				sec := &corev1.Secret{}
				err := k8s.Get(suiteCtx, client.ObjectKey{Namespace: t.ns, Name: "denied-signing"}, sec)
				Expect(apierrors.IsNotFound(err) || sec.Data[hookv1.SecretKeyPending] == nil).To(BeTrue(), "no secret left pending without a hook")
			})
		})
	}

	It("never writes a GitHub token or a signing secret into logs, events or status", func() {
		secrets := map[string]bool{}
		var all corev1.SecretList
		Expect(k8s.List(suiteCtx, &all)).To(Succeed())
		for _, c := range all.Items {
			if !strings.HasPrefix(c.Namespace, "gh") {
				continue
			}
			for _, v := range c.Data {
				// Tokens, and every secret the manager chose (hex, 64 characters).
				if s := strings.TrimSpace(string(v)); strings.HasPrefix(s, "ghp_") || (c.Labels[hookv1.LabelSigningSecret] == "true" && len(s) >= 32) {
					secrets[s] = true
				}
			}
		}
		expectSecretsNeverShown(secrets)
	})

	It("m: 50 subscriptions on one token over 5 repositories: one list per repository per wave, unchanged ones answered 304", func() {
		var others hookv1.WebhookSubscriptionList
		Expect(k8s.List(suiteCtx, &others)).To(Succeed())
		for i := range others.Items {
			o := &others.Items[i]
			patch := client.MergeFrom(o.DeepCopy())
			o.Spec.Suspend = true
			Expect(client.IgnoreNotFound(k8s.Patch(suiteCtx, o, patch))).To(Succeed())
		}
		t := newGHTenant(true)
		var targets []string
		for r := range 5 {
			targets = append(targets, fmt.Sprintf("repos/scale-%s/repo-%d", t.ns, r))
		}
		ghSrv.Grant(t.token, targets...)
		const interval = 3 * time.Second
		for i := range 50 {
			s := t.sub(fmt.Sprintf("sub-%02d", i), fmt.Sprintf("https://hooks.example.com/gh-m/%02d", i))
			parts := strings.Split(targets[i%5], "/")
			s.Spec.Provider.GitHub = &hookv1.GitHubTarget{Owner: parts[1], Repository: parts[2]}
			s.Spec.ResyncInterval = &metav1.Duration{Duration: interval}
			Expect(k8s.Create(suiteCtx, s)).To(Succeed())
			defer expectReady(s)
		}
		Eventually(func() int {
			n := 0
			for _, tg := range targets {
				n += len(ghSrv.Hooks(tg))
			}
			return n
		}).WithTimeout(60 * time.Second).Should(Equal(50))

		label := ghfake.TokenLabel(t.token)
		count := func() (lists, notModified, writes int) {
			for _, r := range ghSrv.Requests() {
				if r.Token != label {
					continue
				}
				switch r.Op {
				case ghfake.OpList:
					// A list is its first page (each repository's ten hooks take five pages of two).
					if p := r.Query.Get("page"); p != "" && p != "1" {
						continue
					}
					lists++
					if r.NotModified {
						notModified++
					}
				case ghfake.OpCreate, ghfake.OpUpdate, ghfake.OpDelete:
					writes++
				}
			}
			return
		}
		// Let one wave pass so every subscription is on its repository's rhythm (and every
		// client holds its ETags), then measure whole waves.
		ghSrv.ResetRequests()
		Consistently(func() int { _, _, w := count(); return w }).WithTimeout(interval).Should(Equal(0), "no writes once all are Ready")
		ghSrv.ResetRequests()
		const waves = 4
		Consistently(func() int { _, _, w := count(); return w }).WithTimeout(waves*interval).Should(Equal(0), "no writes in steady state")
		lists, notModified, _ := count()
		perWave := float64(lists) / waves
		pages := 0
		for _, r := range ghSrv.Requests() {
			if r.Token == label && r.Op == ghfake.OpList {
				pages++
			}
		}
		fmt.Printf("\nREPORT github-m: 50 subscriptions on one token over 5 repositories, %d waves of %s: %d list calls (%.2f per wave, %.2f per repository per wave; %d page requests), %d of the lists answered 304 Not Modified (no rate limit spent)\n",
			waves, interval, lists, perWave, perWave/5, pages, notModified)
		Expect(perWave).To(BeNumerically("<=", 5+2), "one list per repository per wave")
		Expect(perWave).To(BeNumerically(">=", 2.5), "every repository is still re-read")
		Expect(notModified).To(BeNumerically(">=", lists*3/4), "unchanged repositories answer 304")
	})
})

var _ = DescribeTable("GitHub CEL rules reject bad objects with a message naming the field",
	func(mutate func(s *hookv1.WebhookSubscription), want string) {
		t := &ghTenant{ns: "default", target: "repos/acme/shop", repo: true}
		s := t.sub(fmt.Sprintf("cel-gh-%d", time.Now().UnixNano()), "https://hooks.example.com/x")
		mutate(s)
		err := k8s.Create(suiteCtx, s)
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(want))
	},
	Entry("a github type without its block", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub = nil }, "spec.provider.github must be set when spec.provider.type is github"),
	Entry("a github block on a Stripe subscription", func(s *hookv1.WebhookSubscription) {
		s.Spec.Provider.Type = hookv1.ProviderStripe
		s.Spec.Events = []string{"invoice.paid"}
	}, "spec.provider.github must be set when spec.provider.type is github, and only then"),
	Entry("both a repository and an organization", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub.Organization = "acme" }, "set either owner and repository"),
	Entry("an empty github block", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub = &hookv1.GitHubTarget{} }, "set either owner and repository"),
	Entry("an owner without a repository", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub.Repository = "" }, "owner and repository are set together"),
	Entry("an owner GitHub would refuse", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub.Owner = "-acme" }, "spec.provider.github.owner"),
	Entry("an owner over 39 characters", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub.Owner = strings.Repeat("a", 40) }, "spec.provider.github.owner"),
	Entry("a repository name GitHub would refuse", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub.Repository = "shop/web" }, "spec.provider.github.repository"),
	Entry("a repository named ..", func(s *hookv1.WebhookSubscription) { s.Spec.Provider.GitHub.Repository = ".." }, "spec.provider.github.repository must not be . or .."),
	Entry("an organization GitHub would refuse", func(s *hookv1.WebhookSubscription) {
		s.Spec.Provider.GitHub = &hookv1.GitHubTarget{Organization: "acme_corp"}
	}, "spec.provider.github.organization"),
	Entry("a Stripe-style event name", func(s *hookv1.WebhookSubscription) { s.Spec.Events = []string{"invoice.paid"} }, "GitHub names events in lowercase"),
	Entry("an App beside a repository", func(s *hookv1.WebhookSubscription) {
		s.Spec.Provider.GitHub.App = &hookv1.GitHubApp{AppID: "12345"}
	}, "or app (a GitHub App's webhook)"),
	Entry("an App beside an organization", func(s *hookv1.WebhookSubscription) {
		s.Spec.Provider.GitHub = &hookv1.GitHubTarget{Organization: "acme", App: &hookv1.GitHubApp{AppID: "12345"}}
	}, "set either owner and repository (a repository hook), organization (an organization hook) or app"),
	Entry("an App ID that is neither an ID nor a client ID", func(s *hookv1.WebhookSubscription) {
		s.Spec.Provider.GitHub = &hookv1.GitHubTarget{App: &hookv1.GitHubApp{AppID: "my-app"}}
	}, "spec.provider.github.app.appID"),
)

// One odd foreign hook stalls nothing: a retired service hook GitHub renders without
// config.url is skipped as foreign and reported once (one Event for the whole repository,
// however many subscriptions and resyncs see it); a hook of ours that stops fitting stalls its
// own subscription alone.
var _ = Describe("WebhookSubscription on GitHub with a hook that does not fit", Ordered, func() {
	var mgr *runningManager
	BeforeAll(func() { mgr = startManager(managerOptions{}) })
	AfterAll(func() { mgr.Stop() })
	It("skips a foreign unfit hook, reports it once, and stalls only the subscription whose own hook stops fitting", func() {
		t := newGHTenant(true)
		legacy := ghSrv.Seed(t.target, ghfake.LegacyServiceHook())
		a, b := t.sub("orders", "https://hooks.example.com/unfit/orders"), t.sub("refunds", "https://hooks.example.com/unfit/refunds")
		Expect(k8s.Create(suiteCtx, a)).To(Succeed())
		Expect(k8s.Create(suiteCtx, b)).To(Succeed())
		gotA, gotB := expectReady(a), expectReady(b)
		Expect(gotA.Status.EndpointID).NotTo(Equal(hookID(legacy)))

		unfitEvents := func(g Gomega) int {
			n := 0
			for _, s := range []*hookv1.WebhookSubscription{a, b} {
				for _, e := range eventsFor(g, s) {
					if e.Reason == hookv1.ReasonUnfitRegistration {
						g.Expect(e.Note).To(ContainSubstring(hookID(legacy)))
						n++ // the events API folds repeats into a series: count them too
						if e.Series != nil {
							n += int(e.Series.Count) - 1
						}
					}
				}
			}
			return n
		}
		Eventually(unfitEvents).Should(Equal(1))
		// Several resyncs (2 s each) later, still reported once, both still Ready.
		lists := len(t.requests(ghfake.OpList))
		Eventually(func() int { return len(t.requests(ghfake.OpList)) }).WithTimeout(30 * time.Second).Should(BeNumerically(">=", lists+3))
		Consistently(unfitEvents).WithTimeout(3 * time.Second).Should(Equal(1))
		Expect(condition(get(Default, a), hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(t.hooks()).To(ContainElement(HaveField("ID", legacy.ID)), "the foreign hook is left alone")

		// Our own hook loses config.url (edited by some other tool): that subscription stalls,
		// naming the problem; the other one stays Ready; nothing is created or deleted.
		creates := t.creates()
		id, _ := strconv.ParseInt(gotA.Status.EndpointID, 10, 64)
		Expect(ghSrv.Edit(t.target, id, func(h *ghfake.Hook) {
			h.Quirks = append(h.Quirks, fakeapi.Quirk{Path: "config.url"})
		})).To(BeTrue())
		Eventually(func(g Gomega) {
			c := condition(get(g, a), hookv1.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(hookv1.ReasonUnfitRegistration))
			g.Expect(c.Message).To(ContainSubstring("config.url"))
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(condition(get(g, b), hookv1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(4 * time.Second).Should(Succeed())
		Expect(t.creates()).To(Equal(creates))
		Expect(t.hooks()).To(HaveLen(3))
		Expect(gotB.Status.EndpointID).NotTo(BeEmpty())
	})
})
