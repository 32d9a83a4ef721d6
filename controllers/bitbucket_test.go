package controllers_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/bitbucket"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
)

// The Bitbucket Cloud profiles run the REST scenarios' tenants (rest_test.go) against the fake
// Bitbucket (providers/rest/fakes/bitbucket) over HTTP, each named as a user names it: through
// spec.provider.rest.builtin, the copy built into the manager. The secret is ours (chosen,
// stored as pending, sent on create), Bitbucket never returns it and an update that omits it
// keeps it; the marker rides at the end of the description; there is no API to resend
// deliveries. Repository and workspace hooks are the same API under two paths.

// bitbucketAPI is one repository or workspace at the fake Bitbucket.
type bitbucketAPI struct {
	srv *bitbucket.Server
	key string // "repositories/ws/repo" or "workspaces/ws", as the fake names it
}

func (a *bitbucketAPI) regs() []restReg {
	var out []restReg
	for _, h := range a.srv.Hooks(a.key) {
		out = append(out, restReg{ID: h.UUID, URL: h.URL, Events: h.Events, Description: h.Description, Secret: h.Secret, Disabled: !h.Active})
	}
	return out
}

func (a *bitbucketAPI) seed(r restReg) string {
	return a.srv.Seed(a.key, bitbucket.Hook{URL: r.URL, Events: r.Events, Description: r.Description, Secret: r.Secret, Active: !r.Disabled})
}

func (a *bitbucketAPI) remove(id string) bool { return a.srv.Remove(a.key, id) }

func (a *bitbucketAPI) edit(id string, fn func(r *restReg)) bool {
	for _, r := range a.regs() {
		if r.ID == id {
			fn(&r)
			return a.srv.Edit(a.key, id, func(h *bitbucket.Hook) {
				h.URL, h.Events, h.Description, h.Secret, h.Active = r.URL, r.Events, r.Description, r.Secret, !r.Disabled
			})
		}
	}
	return false
}

func (a *bitbucketAPI) fake() *core.Core { return &a.srv.Core }

func (a *bitbucketAPI) mine(r core.Request) bool { return strings.HasPrefix(r.Path, "/2.0/"+a.key+"/") }

var (
	bbSrv = bitbucket.New(bitbucket.WithPageSize(3))
	bbURL string
)

// bitbucketKind is one Bitbucket profile; repository names the hooks' repository, or "" for
// workspace hooks.
func bitbucketKind(name, prefix, profile, repository string) *restKind {
	key := func(ws string) string {
		if repository == "" {
			return "workspaces/" + ws
		}
		return "repositories/" + ws + "/" + repository
	}
	return &restKind{
		name: name, prefix: prefix, profile: profile, builtin: true,
		events: []string{"repo:push", "pullrequest:created"}, otherEvent: "issue:created", clientChosen: true, secretField: "secret",
		collection: func(t *restTenant) string { return "/2.0/" + t.api.(*bitbucketAPI).key + "/hooks" },
		newAccount: func(n int) (restAPI, string, map[string]string) {
			ws := fmt.Sprintf("%s-acme-%d", prefix, n)
			params := map[string]string{"workspace": ws}
			if repository == "" {
				bbSrv.AddWorkspace(ws)
			} else {
				bbSrv.AddRepository(ws, repository)
				params["repository"] = repository
			}
			return &bitbucketAPI{srv: bbSrv, key: key(ws)}, bbURL + "/2.0", params
		},
		mark: func(r *restReg, o providers.Owner) {
			r.Description = strings.TrimSpace(r.Description + " [" + marker(o) + "]")
		},
		marked: func(r restReg, o providers.Owner) bool { return strings.HasSuffix(r.Description, "["+marker(o)+"]") },
		deliver: func(secret, id string) providers.Delivery {
			body := []byte(`{"repository":{"full_name":"acme/shop"},"push":{"changes":[]}}`)
			m := hmac.New(sha256.New, []byte(secret))
			m.Write(body)
			h := http.Header{}
			h.Set("X-Event-Key", "repo:push")
			h.Set("X-Hub-Signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
			h.Set("X-Request-UUID", id)
			return providers.Delivery{Header: h, Body: body, Now: time.Now()}
		},
		rateLimit: bitbucket.RateLimited,
	}
}

var bitbucketKinds = []*restKind{
	bitbucketKind("Bitbucket Cloud repository hooks (builtin profile, client-chosen secret)", "bbr", "bitbucket-repository-hooks", "shop"),
	bitbucketKind("Bitbucket Cloud workspace hooks (builtin profile, client-chosen secret)", "bbw", "bitbucket-workspace-hooks", ""),
}

// bbPuts are the PUTs to hook id (its path as the manager sends it: the uuid keeps its braces,
// escaped).
func bbPuts(t *restTenant, id string) []core.Request {
	return t.requests(http.MethodPut, t.item(id))
}

// bbCalls are t's requests as REPORT lines name them: the workspace, repository and hook id
// as placeholders.
func bbCalls(t *restTenant, reqs []core.Request) []call {
	key := t.api.(*bitbucketAPI).key
	named := "workspaces/{workspace}"
	if strings.HasPrefix(key, "repositories/") {
		named = "repositories/{workspace}/{repo_slug}"
	}
	out := make([]call, 0, len(reqs))
	for _, r := range reqs {
		p := strings.Replace(r.Path, key, named, 1)
		if head, _, ok := strings.Cut(p, "/hooks/"); ok {
			p = head + "/hooks/{uid}"
		}
		out = append(out, call{r.Method, p})
	}
	return out
}

// bbDeleted expects n hooks deleted through the API, each answered 204.
func bbDeleted(t *restTenant, n int) {
	GinkgoHelper()
	deletes := t.requests(http.MethodDelete, t.kind.collection(t)+"/")
	Expect(deletes).To(HaveLen(n))
	for _, d := range deletes {
		Expect(d.Status).To(Equal(http.StatusNoContent))
	}
}

var _ = Describe("WebhookSubscription on Bitbucket Cloud", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	BeforeAll(func() {
		var stop func()
		bbURL, stop = bbSrv.Start()
		DeferCleanup(stop)
		mgr = startManager(managerOptions{})
	})
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	for _, kind := range bitbucketKinds {
		Context(kind.name, func() {
			newT := func() *restTenant { return newRESTTenant(kind) }

			It("a: creates one hook with the secret we chose, stores that secret, becomes Ready, and says recovery is not available", func() {
				t := newT()
				s := t.sub("orders", "https://Hooks.Example.com:443/hooks/shop/orders")
				got, r := expectRESTCreatedOnce(t, s)
				Expect(r.Description).To(Equal("orders pipeline ["+marker(t.owner(got))+"]"), "the marker at the end of the description")
				Expect(r.ID).To(HavePrefix("{"), "the id is the hook's uuid, braces included")

				// The secret travelled in the create, with our credential; Bitbucket never
				// returns it, so nothing read it back.
				creates := t.requests(http.MethodPost, kind.collection(t))
				Expect(creates).To(HaveLen(1))
				Expect(creates[0].Status).To(Equal(http.StatusCreated))
				Expect(creates[0].Header.Get("Authorization")).To(Equal("Bearer " + t.cred))
				Expect(string(creates[0].Body)).To(ContainSubstring(`"secret":"` + r.Secret + `"`))

				// No recover section: the status says so, as for every profile without one.
				Eventually(func(g Gomega) {
					st := get(g, s).Status.Recovery
					g.Expect(st).NotTo(BeNil())
					g.Expect(st.Available).To(BeFalse())
					g.Expect(st.Message).To(Equal("recovery is not available on this provider profile (no recover section)"))
				}).Should(Succeed())
			})

			It("b: a restarted manager creates nothing and writes nothing", func() {
				expectRestartWritesNothing(newT(), &mgr)

				// One subscription without a periodic resync: what its first reconcile sends,
				// and what the restart's resync sends (reads only).
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/counted")
				s.Spec.ResyncInterval = &metav1.Duration{Duration: time.Hour}
				first, resync := expectRestartWritesNothing(t, &mgr, s)
				reportRequests(kind.profile, "first-reconcile", bbCalls(t, first))
				reportRequests(kind.profile, "steady-resync", bbCalls(t, resync))
				expectReadsOnly(bbCalls(t, resync))
			})

			It("c: a crash right after Bitbucket created the hook leaves one hook, found again by its marker, with the secret stored before the create", func() {
				t := newT()
				expectCrashAfterCreateRecovered(t, &mgr)
				// The one create carried the secret the hook signs with.
				creates := t.requests(http.MethodPost, kind.collection(t))
				Expect(creates).To(HaveLen(1))
				Expect(string(creates[0].Body)).To(ContainSubstring(`"secret":"` + t.only().Secret + `"`))
			})

			It("c2: a create whose answer was lost, and one that failed before Bitbucket saw it, each end with one hook and its secret", func() {
				expectLostCreateAnswers(newT())
			})

			It("f: prunes proven twins; near-twins (reported) and other owners' hooks are never touched", func() {
				t := newT()
				expectTwinsPruned(t)
				bbDeleted(t, 2) // the two twins
			})

			It("g: never changes foreign hooks on the workspace or repository", func() {
				expectForeignUntouched(newT())
			})

			It("g: an unmarked hook for our URL alone is adopted under Adopt (marked, its secret replaced by ours, no create) and left alone under Never (Conflict)", func() {
				t := newT()
				const hookURL = "https://hooks.example.com/hand-made"
				handMade := t.api.seed(restReg{URL: hookURL, Events: kind.events[:1], Description: "made by hand", Secret: "made-by-hand"})
				s := createReady(t.sub("orders", hookURL))
				r := t.only()
				Expect(r.ID).To(Equal(handMade), "adopted, not duplicated")
				Expect(t.creates()).To(BeZero())
				Expect(r.Events).To(ConsistOf(kind.events))
				Expect(kind.marked(r, t.owner(s))).To(BeTrue(), "marked as ours: %+v", r)
				Expect(r.Secret).NotTo(Equal("made-by-hand"), "a secret we did not choose is not trusted")
				expectRESTSecret(t, s, handMade)
				Expect(bbPuts(t, handMade)).NotTo(BeEmpty())

				t2 := newT()
				never := restReg{URL: hookURL, Events: kind.events, Description: "made by hand", Secret: "made-by-hand"}
				left := t2.api.seed(never)
				before, _ := t2.reg(left)
				s2 := t2.sub("orders", hookURL)
				s2.Spec.Policies.Adoption = hookv1.AdoptionNever
				Expect(k8s.Create(suiteCtx, s2)).To(Succeed())
				Eventually(func(g Gomega) {
					c := condition(get(g, s2), hookv1.ConditionReconciling)
					g.Expect(c).NotTo(BeNil())
					g.Expect(c.Reason).To(Equal(hookv1.ReasonConflict))
					g.Expect(c.Message).To(ContainSubstring(left))
					g.Expect(c.Message).To(ContainSubstring("carries no ownership marker; policies.adoption is Never"))
				}).WithTimeout(20 * time.Second).Should(Succeed())
				Consistently(func(g Gomega) {
					g.Expect(t2.requests("", t2.item(left))).To(BeEmpty())
					g.Expect(t2.writes()).To(BeZero())
				}).WithTimeout(5 * time.Second).Should(Succeed())
				after, ok := t2.reg(left)
				Expect(ok).To(BeTrue())
				Expect(after).To(Equal(before))
				Expect(t2.regs()).To(HaveLen(1))
			})

			It("d: status cleared by hand is taken back by its marker, without a create", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/cleared")
				s.Spec.Policies.Adoption = hookv1.AdoptionNever // the proof is the marker, not adoption
				expectStatusClearedTakenBack(t, s, t.writes)
				Expect(t.creates()).To(Equal(1))
				expectRESTSecret(t, s, get(Default, s).Status.EndpointID)
			})

			It("e: repairs out-of-band edits: a deleted hook is recreated; drifted fields and a respelt URL are fixed in place, the secret kept", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/oob")
				id := expectRemovedRecreated(t, s)

				secret, creates := t.only().Secret, t.creates()
				Expect(t.api.edit(id, func(r *restReg) {
					r.Events, r.Description, r.Disabled = []string{kind.otherEvent}, "edited by hand", true
				})).To(BeTrue())
				Eventually(func(g Gomega) {
					r := t.only()
					g.Expect(r.ID).To(Equal(id), "updated in place")
					g.Expect(r.Events).To(ConsistOf(kind.events))
					g.Expect(r.Description).To(Equal("orders pipeline [" + marker(t.owner(get(g, s))) + "]"))
					g.Expect(r.Disabled).To(BeFalse())
					g.Expect(r.Secret).To(Equal(secret), "the secret survives the update")
				}).WithTimeout(20 * time.Second).Should(Succeed())
				Expect(t.creates()).To(Equal(creates))
				puts := bbPuts(t, id)
				Expect(puts).NotTo(BeEmpty())
				for _, p := range puts {
					// An update that omits the secret keeps it; one that sends it sends the one held.
					var body map[string]any
					Expect(json.Unmarshal(p.Body, &body)).To(Succeed())
					if v, ok := body["secret"]; ok {
						Expect(v).To(Equal(secret), "an update sends no secret but the one held")
					}
				}

				// The URL respelt (canonically the same): PUT takes it in place.
				Expect(t.api.edit(id, func(r *restReg) { r.URL = "https://HOOKS.example.com:443/oob" })).To(BeTrue())
				Eventually(func(g Gomega) {
					r := t.only()
					g.Expect(r.URL).To(Equal("https://hooks.example.com/oob"))
					g.Expect(r.ID).To(Equal(id))
					g.Expect(r.Secret).To(Equal(secret))
				}).WithTimeout(20 * time.Second).Should(Succeed())
				Expect(t.creates()).To(Equal(creates))
				expectRESTSecret(t, s, id)
				expectReady(s)
			})

			It("h: a changed URL gets a new hook, the old one is removed and the Secret follows", func() {
				t := newT()
				s, old, id := expectURLChangeFollowed(t)
				Expect(t.requests(http.MethodDelete, t.item(old))).To(HaveLen(1))
				Expect(t.creates()).To(Equal(2))
				expectRESTSecret(t, s, id)
				expectReady(s)
			})

			It("k: a requested rotation and a deleted signing Secret each set a new secret of ours on the same hook, stored before Bitbucket hears of it", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/secret")
				id := createReady(s).Status.EndpointID
				first := t.only().Secret
				expectRESTSecret(t, s, id)

				w := watchOverlap(s, first)
				annotate(s, hookv1.AnnotationRotateRequestedAt, "2026-12-07T10:00:00Z")
				var rotated string
				Eventually(func(g Gomega) {
					r := t.only()
					g.Expect(r.ID).To(Equal(id), "set in place: Bitbucket updates a hook's secret")
					g.Expect(r.Secret).NotTo(Equal(first))
					rotated = r.Secret
					cur := get(g, s)
					g.Expect(cur.Status.LastHandledRotateAt).To(Equal("2026-12-07T10:00:00Z"))
					g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(rotated))
					g.Expect(hasEvent(g, s, hookv1.ReasonSecretRotated, id)).To(BeTrue())
				}).WithTimeout(20 * time.Second).Should(Succeed())
				expectRESTSecret(t, s, id)
				puts := bbPuts(t, id)
				Expect(puts).To(HaveLen(1))
				Expect(string(puts[0].Body)).To(ContainSubstring(`"secret":"` + rotated + `"`))
				w.report(kind.profile, "one PUT of the hook sets our new secret in place (no second hook); Bitbucket signs with the old one until that PUT and with the new one after it")
				Expect(t.creates()).To(Equal(1))
				Expect(t.requests(http.MethodDelete, kind.collection(t)+"/")).To(BeEmpty())

				deleteSigningSecret(s)
				Eventually(func(g Gomega) {
					r := t.only()
					g.Expect(r.ID).To(Equal(id))
					g.Expect(r.Secret).NotTo(BeElementOf(first, rotated), "a new secret")
					g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(r.Secret))
				}).WithTimeout(20 * time.Second).Should(Succeed())
				expectRESTSecret(t, s, id)
				Expect(bbPuts(t, id)).To(HaveLen(2))
				Expect(t.creates()).To(Equal(1))
				expectReady(s)
			})

			It("j: deletion honours the policy, and missing credentials block it visibly", func() {
				t := newT()
				expectDeletionPolicies(t)
				bbDeleted(t, 2) // exactly the hooks deleted
			})

			It("l: a hook whose URL and events were edited at Bitbucket is repaired in place, same id", func() {
				t := newT()
				var moved string
				expectMovedOutOfBandRepaired(t, t.creates, true, func(id string) {
					moved = id
					Expect(t.api.edit(id, func(r *restReg) { r.URL, r.Events = "https://elsewhere.example.com/hooks", []string{kind.otherEvent} })).To(BeTrue())
				})
				// One PUT of the hook puts URL and events back; nothing else is written.
				puts := bbPuts(t, moved)
				Expect(puts).To(HaveLen(1))
				Expect(string(puts[0].Body)).To(ContainSubstring(`"url":"https://hooks.example.com/moved"`))
				Expect(t.writes()).To(Equal(2), "the create and that PUT")
				Expect(t.requests(http.MethodDelete, kind.collection(t)+"/")).To(BeEmpty())
			})

			It("i: Bitbucket's 429 without a wait holds the create back for the profile's backoff (a minute), saying RateLimited", func() {
				t := newT()
				f := kind.rateLimit()
				f.Method, f.PathPrefix = http.MethodPost, kind.collection(t)
				remove := t.api.fake().Inject(f)
				defer remove()
				s := t.sub("orders", "https://hooks.example.com/storm")
				expectRateLimited(s)
				Consistently(func() int { return len(t.requests(http.MethodPost, kind.collection(t))) }).
					WithTimeout(5*time.Second).Should(Equal(1), "no retry before the backoff")
				Expect(t.regs()).To(BeEmpty())
			})
		})
	}

	It("a credential Bitbucket refuses (a revoked token: 401; a role without hook admin: 403) stalls Unauthorized with Bitbucket's message, and sends nothing more", func() {
		type refused struct {
			t       *restTenant
			s       *hookv1.WebhookSubscription
			message string
		}
		var all []refused
		for _, kind := range bitbucketKinds {
			revoked := newRESTTenant(kind)
			const invalid = "Token is invalid, expired, or not supported for this endpoint."
			body, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"message": invalid}})
			DeferCleanup(revoked.api.fake().Inject(core.Fault{PathPrefix: kind.collection(revoked), Status: http.StatusUnauthorized, Body: string(body)}))
			member := newRESTTenant(kind)
			bbSrv.SetRole(member.cred, member.params["workspace"], bitbucket.Member)
			for _, r := range []refused{{revoked, nil, invalid}, {member, nil, "Your credentials lack one or more required privilege scopes."}} {
				r.s = slowResync(r.t.sub("refused", "https://hooks.example.com/refused"))
				Expect(k8s.Create(suiteCtx, r.s)).To(Succeed())
				all = append(all, r)
			}
		}
		for _, r := range all {
			Eventually(func(g Gomega) {
				c := condition(get(g, r.s), hookv1.ConditionStalled)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(hookv1.ReasonUnauthorized), c.Message)
				g.Expect(c.Message).To(ContainSubstring(r.message))
				g.Expect(c.Message).NotTo(ContainSubstring(r.t.cred), "the credential never in status")
			}).WithTimeout(30 * time.Second).Should(Succeed())
		}
		start := make([]int, len(all))
		for i, r := range all {
			start[i] = len(r.t.requests("", "/"))
			Expect(r.t.regs()).To(BeEmpty())
		}
		// No hot loop: nothing until something changes or the resync interval (ten minutes).
		Consistently(func(g Gomega) {
			for i, r := range all {
				g.Expect(len(r.t.requests("", "/"))-start[i]).To(BeZero(), "%s: requests after the stall", r.t.ns)
			}
		}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		for i, r := range all {
			fmt.Printf("REPORT bitbucket refused %s: %d requests to the stall, 0 in the 10 s after it\n", r.t.ns, start[i])
		}
	})

	It("the workspace credential may be an API token with a username (Basic)", func() {
		t := newRESTTenant(bitbucketKinds[1])
		t.params["username"] = "ci-bot"
		s := createReady(t.sub("orders", "https://hooks.example.com/basic"))
		creates := t.requests(http.MethodPost, t.kind.collection(t))
		Expect(creates).To(HaveLen(1))
		Expect(creates[0].Header.Get("Authorization")).To(Equal("Basic " + base64.StdEncoding.EncodeToString([]byte("ci-bot:"+t.cred))))
		expectRESTSecret(t, s, t.only().ID)
	})
})
