package controllers_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers"
	restprovider "github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/pagerduty"
)

// The REST scenarios run the same manager against two shipped profiles (config/samples/rest),
// loaded as a user would load them: a ConfigMap in the subscription's namespace named by
// spec.provider.rest.profileRef. Each is served by its API's fake (providers/rest/fakes, written
// from the API's documentation, not from the profile) over real HTTP:
//
//   - GitLab project hooks: the operator chooses the secret token (written to the Secret as
//     pending before GitLab hears of it), GitLab never returns it, updates resend it; the
//     ownership marker is the hook's name.
//   - PagerDuty v3 webhook subscriptions: PagerDuty generates the secret and shows it in the
//     create response only, nothing reads it back or rotates it, and the delivery URL cannot be
//     updated; the marker is in the description. Where GitLab sets a new secret in place,
//     PagerDuty can only get a new subscription: a lost secret, or a URL that must change, is a
//     rotation make-before-break (create, store the new secret, delete the old).
//
// Every scenario checks what the fake holds and which requests it received, and that the
// signing Secret verifies a delivery signed the way the API signs it.

// restReg is one registration at a REST fake, in one shape for both APIs.
type restReg struct {
	ID, URL     string
	Events      []string
	Name        string // GitLab: the hook's name (the marker)
	Description string // PagerDuty: the marker is in here
	Secret      string // what the API signs with (GitLab: the token it sends)
	Disabled    bool   // PagerDuty: !active
	VerifySSL   bool   // GitLab: enable_ssl_verification
}

// restAPI is one account at a REST fake.
type restAPI interface {
	regs() []restReg
	seed(r restReg) string
	remove(id string) bool
	edit(id string, fn func(r *restReg)) bool
	// mine reports whether a logged request was made for this account.
	mine(r core.Request) bool
	// fake is the fake's request log and faults.
	fake() *core.Core
}

// restKind is one shipped profile and its fake.
type restKind struct {
	name    string
	prefix  string // of the tenants' namespaces
	profile string // config/samples/rest/<profile>.profile.yaml
	// builtin: the subscriptions name the profile with spec.provider.rest.builtin (the copy
	// built into the manager) instead of a ConfigMap.
	builtin bool
	events  []string
	// otherEvent is an event of the API the subscriptions do not ask for.
	otherEvent string
	// clientChosen: the operator chooses the secret (GitLab); else the API returns it on
	// create only (PagerDuty).
	clientChosen bool
	// secretField is the create body's field carrying a client-chosen secret.
	secretField string
	// pings: the profile has a ping request.
	pings bool
	// collection is the list and create path of an account, for the request log.
	collection func(t *restTenant) string
	newAccount func(n int) (api restAPI, apiURL string, params map[string]string)
	// mark puts owner's marker where the profile keeps it; marked finds it.
	mark   func(r *restReg, o providers.Owner)
	marked func(r restReg, o providers.Owner) bool
	// deliver signs a delivery with secret as the API does; id is its event id.
	deliver func(secret, id string) providers.Delivery
	// rateLimit is the API's documented rate-limit answer.
	rateLimit func() core.Fault
}

// marker is the ownership token the REST provider writes (providers/rest/object.go); it is
// spelled here, not imported, because its spelling is stored in provider accounts.
func marker(o providers.Owner) string {
	return "hookwarden:" + strings.Join([]string{url.PathEscape(o.Cluster), url.PathEscape(o.Namespace), url.PathEscape(o.Name), url.PathEscape(o.UID)}, "/")
}

// gitlabAPI is one project at the fake GitLab.
type gitlabAPI struct {
	srv     *gitlab.Server
	project string // numeric id
	path    string // group/project, as the subscription names it
}

func gitlabEvent(flag string) string { return strings.TrimSuffix(flag, "_events") }

func (a *gitlabAPI) regs() []restReg {
	var out []restReg
	for _, h := range a.srv.Hooks(a.project) {
		r := restReg{ID: strconv.Itoa(h.ID), URL: h.URL, Name: h.Name, Description: h.Description, Secret: h.Token, VerifySSL: h.SSL}
		for _, f := range gitlab.Events {
			if h.Flags[f] {
				r.Events = append(r.Events, gitlabEvent(f))
			}
		}
		out = append(out, r)
	}
	return out
}

func (a *gitlabAPI) write(r restReg, h *gitlab.Hook) {
	h.URL, h.Name, h.Description, h.Token, h.SSL = r.URL, r.Name, r.Description, r.Secret, r.VerifySSL
	h.Flags = map[string]bool{}
	for _, f := range gitlab.Events {
		h.Flags[f] = slices.Contains(r.Events, gitlabEvent(f))
	}
}

func (a *gitlabAPI) seed(r restReg) string {
	var h gitlab.Hook
	a.write(r, &h)
	return strconv.Itoa(a.srv.Seed(a.project, h))
}

func (a *gitlabAPI) remove(id string) bool {
	n, err := strconv.Atoi(id)
	return err == nil && a.srv.Remove(a.project, n)
}

func (a *gitlabAPI) edit(id string, fn func(r *restReg)) bool {
	n, err := strconv.Atoi(id)
	if err != nil {
		return false
	}
	for _, r := range a.regs() {
		if r.ID == id {
			fn(&r)
			return a.srv.Edit(a.project, n, func(h *gitlab.Hook) { a.write(r, h) })
		}
	}
	return false
}

func (a *gitlabAPI) fake() *core.Core { return &a.srv.Core }

func (a *gitlabAPI) mine(r core.Request) bool {
	return strings.HasPrefix(r.Path, "/api/v4/projects/"+url.PathEscape(a.path)+"/")
}

// pagerdutyAPI is one account (API key) at the fake PagerDuty.
type pagerdutyAPI struct {
	srv *pagerduty.Server
	key string
}

func (a *pagerdutyAPI) regs() []restReg {
	var out []restReg
	for _, s := range a.srv.Subscriptions(a.key) {
		out = append(out, restReg{ID: s.ID, URL: s.URL, Events: s.Events, Description: s.Description, Secret: s.Secret, Disabled: !s.Active})
	}
	return out
}

func (a *pagerdutyAPI) seed(r restReg) string {
	return a.srv.Seed(a.key, pagerduty.Subscription{URL: r.URL, Events: r.Events, Description: r.Description})
}

func (a *pagerdutyAPI) remove(id string) bool { return a.srv.Remove(a.key, id) }

func (a *pagerdutyAPI) edit(id string, fn func(r *restReg)) bool {
	for _, r := range a.regs() {
		if r.ID == id {
			fn(&r)
			return a.srv.Edit(a.key, id, func(s *pagerduty.Subscription) {
				s.URL, s.Events, s.Description, s.Active = r.URL, r.Events, r.Description, !r.Disabled
			})
		}
	}
	return false
}

func (a *pagerdutyAPI) fake() *core.Core { return &a.srv.Core }

func (a *pagerdutyAPI) mine(r core.Request) bool {
	return r.Header.Get("Authorization") == "Token token="+a.key
}

var (
	glSrv, pdSrv   = gitlab.New(), pagerduty.New()
	glURL, pdURL   string
	restAccountSeq atomic.Int64
)

var restKinds = []*restKind{
	{
		name: "GitLab project hooks (client-chosen secret token)", prefix: "gl", profile: "gitlab-project-hooks",
		events: []string{"push", "merge_requests"}, otherEvent: "issues", clientChosen: true, secretField: "token",
		collection: func(t *restTenant) string {
			return "/api/v4/projects/" + url.PathEscape(t.api.(*gitlabAPI).path) + "/hooks"
		},
		newAccount: func(n int) (restAPI, string, map[string]string) {
			a := &gitlabAPI{srv: glSrv, project: strconv.Itoa(4000 + n), path: fmt.Sprintf("acme/shop-%d", n)}
			glSrv.AddProject(a.project, a.path)
			return a, glURL + "/api/v4", map[string]string{"project": a.path}
		},
		mark: func(r *restReg, o providers.Owner) { r.Name = marker(o) },
		// The marker alone, or after a name given by hand (which an update keeps).
		marked: func(r restReg, o providers.Owner) bool {
			return r.Name == marker(o) || strings.HasSuffix(r.Name, " ["+marker(o)+"]")
		},
		deliver: func(secret, id string) providers.Delivery {
			h := http.Header{}
			h.Set("X-Gitlab-Event", "Push Hook")
			h.Set("X-Gitlab-Token", secret)
			h.Set("Idempotency-Key", id)
			h.Set("X-Gitlab-Event-UUID", "recursion-"+id)
			return providers.Delivery{Header: h, Body: []byte(`{"object_kind":"push"}`), Now: time.Now()}
		},
		// GitLab's create limit: 429 with Retry-After (60 s documented; 1 s here, read the
		// same way, so the scenario does not wait minutes).
		rateLimit: func() core.Fault {
			return core.Fault{Method: "POST", Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "1"},
				Body: `{"message":"This endpoint has been requested too many times. Try again later."}`}
		},
	},
	{
		name: "PagerDuty v3 webhook subscriptions (secret returned on create only)", prefix: "pd", profile: "pagerduty-webhook-subscriptions",
		events: []string{"incident.triggered", "incident.resolved"}, otherEvent: "incident.acknowledged", pings: true,
		collection: func(*restTenant) string { return "/webhook_subscriptions" },
		newAccount: func(n int) (restAPI, string, map[string]string) {
			a := &pagerdutyAPI{srv: pdSrv, key: fmt.Sprintf("pd-key-%d-%d", n, time.Now().UnixNano())}
			return a, pdURL, map[string]string{"filterType": "service_reference", "filterID": fmt.Sprintf("PSVC%d", n)}
		},
		mark: func(r *restReg, o providers.Owner) {
			r.Description = strings.TrimSpace(r.Description + " [" + marker(o) + "]")
		},
		marked: func(r restReg, o providers.Owner) bool { return strings.Contains(r.Description, "["+marker(o)+"]") },
		deliver: func(secret, id string) providers.Delivery {
			body := []byte(`{"event":{"id":"` + id + `","event_type":"incident.triggered"}}`)
			sign := func(key string) string {
				m := hmac.New(sha256.New, []byte(key))
				m.Write(body)
				return "v1=" + hex.EncodeToString(m.Sum(nil))
			}
			h := http.Header{}
			// PagerDuty may sign with several secrets at once: any one matching is enough.
			h.Set("X-PagerDuty-Signature", sign("a-secret-being-rotated-out")+","+sign(secret))
			h.Set("X-Webhook-Id", id)
			return providers.Delivery{Header: h, Body: body, Now: time.Now()}
		},
		// PagerDuty: 429 with ratelimit-reset (seconds), no Retry-After (04-Rate-Limits.md).
		rateLimit: func() core.Fault {
			return core.Fault{Method: "POST", Status: http.StatusTooManyRequests, Header: map[string]string{"ratelimit-limit": "960", "ratelimit-remaining": "0", "ratelimit-reset": "1"},
				Body: `{"error":{"message":"Rate Limit Exceeded","code":2020}}`}
		},
	},
}

// restTenant is one test's namespace, credential, profile ConfigMap and account.
type restTenant struct {
	kind   *restKind
	ns     string
	cred   string
	api    restAPI
	apiURL string
	params map[string]string
}

const (
	restCredentials = "rest-api"
	restProfiles    = "hookwarden-rest-profiles"
)

func newRESTTenant(k *restKind) *restTenant {
	n := int(restAccountSeq.Add(1))
	t := &restTenant{kind: k, ns: fmt.Sprintf("%s%d-%d", k.prefix, n, time.Now().UnixNano()%100000), cred: fmt.Sprintf("%s-token-%d-%d", k.prefix, n, time.Now().UnixNano())}
	t.api, t.apiURL, t.params = k.newAccount(n)
	if pd, ok := t.api.(*pagerdutyAPI); ok {
		t.cred = pd.key // PagerDuty's account is its API key
	}
	Expect(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.ns}})).To(Succeed())
	if k.builtin {
		t.writeCredentials()
		return t
	}
	profile, err := os.ReadFile(filepath.Join("..", "config", "samples", "rest", k.profile+".profile.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(suiteCtx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: restProfiles},
		Data:       map[string]string{k.profile + ".yaml": string(profile)},
	})).To(Succeed())
	t.writeCredentials()
	return t
}

func (t *restTenant) credentials() client.ObjectKey {
	return client.ObjectKey{Namespace: t.ns, Name: restCredentials}
}

func (t *restTenant) writeCredentials() {
	Expect(k8s.Create(suiteCtx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: restCredentials},
		StringData: map[string]string{"token": t.cred},
	})).To(Succeed())
}

// sub returns a valid subscription on this tenant's account; the credentials key is left to
// its default (token).
func (t *restTenant) sub(name, url string) *hookv1.WebhookSubscription {
	rest := &hookv1.RESTProvider{ProfileRef: &hookv1.ConfigMapKeySelector{Name: restProfiles, Key: t.kind.profile + ".yaml"}, Parameters: t.params}
	if t.kind.builtin {
		rest = &hookv1.RESTProvider{Builtin: t.kind.profile, Parameters: t.params}
	}
	return &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider: hookv1.ProviderSpec{
				Type:           hookv1.ProviderREST,
				CredentialsRef: hookv1.SecretKeySelector{Name: restCredentials},
				APIURL:         t.apiURL,
				REST:           rest,
			},
			Endpoint:       hookv1.EndpointSpec{URL: url},
			Events:         t.kind.events,
			Description:    "orders pipeline",
			SigningSecret:  hookv1.SigningSecretSpec{Name: name + "-signing"},
			ResyncInterval: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
}

func (t *restTenant) owner(s *hookv1.WebhookSubscription) providers.Owner {
	return providers.Owner{Cluster: clusterName, Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}
}

func (t *restTenant) regs() []restReg { return t.api.regs() }

func (t *restTenant) reg(id string) (restReg, bool) {
	for _, r := range t.regs() {
		if r.ID == id {
			return r, true
		}
	}
	return restReg{}, false
}

func (t *restTenant) registrations() map[string]string {
	out := map[string]string{}
	for _, r := range t.regs() {
		out[r.ID] = r.URL
	}
	return out
}

func (t *restTenant) registrationIDs() []string {
	ids := []string{}
	for _, r := range t.regs() {
		ids = append(ids, r.ID)
	}
	return ids
}

func (t *restTenant) only() restReg {
	rs := t.regs()
	ExpectWithOffset(1, rs).To(HaveLen(1))
	return rs[0]
}

// requests returns this account's requests with method ("" for any) to path, or below it
// when path ends in "/".
func (t *restTenant) requests(method, path string) []core.Request {
	var out []core.Request
	for _, r := range t.api.fake().Requests() {
		if !t.api.mine(r) || (method != "" && r.Method != method) {
			continue
		}
		if r.Path == path || (strings.HasSuffix(path, "/") && strings.HasPrefix(r.Path, path)) {
			out = append(out, r)
		}
	}
	return out
}

// creates counts create requests that may have created a registration: answered 2xx, or 5xx
// (whose outcome is unknown: the answer may have been lost on the way back); refusals (4xx,
// a rate limit) are not counted.
func (t *restTenant) creates() int {
	n := 0
	for _, r := range t.requests("POST", t.kind.collection(t)) {
		if r.Status < 300 || r.Status >= 500 {
			n++
		}
	}
	return n
}

// writes counts requests that change the account (every method but GET).
func (t *restTenant) writes() int {
	n := 0
	for _, r := range t.requests("", t.kind.collection(t)+"/") {
		if r.Method != http.MethodGet {
			n++
		}
	}
	return n + t.creates()
}

// item is registration id's path as the manager sends it (an id with braces, as Bitbucket's,
// escaped).
func (t *restTenant) item(id string) string { return t.kind.collection(t) + "/" + url.PathEscape(id) }

// expectRESTSecret waits until the signing Secret holds exactly registration id's secret as
// current, with nothing pending, and verifies a delivery the API would sign with it (and
// refuses one signed with another secret) through the verifier the Secret describes.
func expectRESTSecret(t *restTenant, s *hookv1.WebhookSubscription, id string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		r, ok := t.reg(id)
		g.Expect(ok).To(BeTrue(), "registration %s exists", id)
		g.Expect(r.Secret).NotTo(BeEmpty(), "the registration has a secret")
		sec := signingSecret(g, s)
		g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(r.Secret))
		g.Expect(string(sec.Data[hookv1.SecretKeyFor(id)])).To(Equal(r.Secret))
		g.Expect(sec.Data).NotTo(HaveKey(hookv1.SecretKeyPending))
		g.Expect(sec.Annotations).To(HaveKeyWithValue(hookv1.AnnotationEndpointID, id))

		v, err := restprovider.NewVerifierFromSpec(sec.Data[hookv1.SecretKeyVerifier])
		g.Expect(err).NotTo(HaveOccurred())
		current := [][]byte{sec.Data[hookv1.SecretKeyCurrent]}
		got, err := v.Verify(t.kind.deliver(r.Secret, "evt-"+id), current)
		g.Expect(err).NotTo(HaveOccurred(), "a delivery signed with the registration's secret verifies")
		g.Expect(got.EventID).To(Equal("evt-" + id))
		_, err = v.Verify(t.kind.deliver("not-"+r.Secret, "evt-"+id), current)
		g.Expect(err).To(HaveOccurred(), "a delivery signed with another secret does not")
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// expectRESTCreatedOnce is scenario a's common part: s (for https://Hooks.Example.com:443/hooks/shop/orders)
// is created and Ready, and the account holds exactly one registration, made by one create: the
// URL in canonical form, the events asked for, the marker, enabled, its secret in the signing
// Secret, an Event naming it. It returns the subscription as it is then and the registration.
func expectRESTCreatedOnce(t *restTenant, s *hookv1.WebhookSubscription) (*hookv1.WebhookSubscription, restReg) {
	GinkgoHelper()
	got := createReady(s)
	r := t.only()
	Expect(r.URL).To(Equal("https://hooks.example.com/hooks/shop/orders"), "registered in canonical form")
	Expect(r.Events).To(ConsistOf(t.kind.events))
	Expect(t.kind.marked(r, t.owner(got))).To(BeTrue(), "carries the ownership marker: %+v", r)
	Expect(r.Disabled).To(BeFalse())
	Expect(got.Status.EndpointID).To(Equal(r.ID))
	Expect(got.Status.URL).To(Equal(r.URL))
	Expect(t.creates()).To(Equal(1))
	expectRESTSecret(t, s, r.ID)
	Expect(hasEventNow(s, hookv1.ReasonCreated, r.ID)).To(BeTrue())
	return got, r
}

// expectRemovedRecreated is scenario e's first part: s is created and Ready, its registration
// removed at the API by hand is recreated, and the signing Secret ends holding the new one's
// secret and no longer the vanished one's. It returns the new registration's id.
func expectRemovedRecreated(t *restTenant, s *hookv1.WebhookSubscription) string {
	GinkgoHelper()
	old := createReady(s).Status.EndpointID
	Expect(t.api.remove(old)).To(BeTrue())
	var id string
	Eventually(func(g Gomega) {
		rs := t.regs()
		g.Expect(rs).To(HaveLen(1))
		g.Expect(rs[0].ID).NotTo(Equal(old))
		id = rs[0].ID
		g.Expect(get(g, s).Status.EndpointID).To(Equal(id))
		g.Expect(signingSecret(g, s).Data).NotTo(HaveKey(hookv1.SecretKeyFor(old)), "the vanished registration's secret is no longer accepted")
	}).WithTimeout(20 * time.Second).Should(Succeed())
	expectRESTSecret(t, s, id)
	return id
}

// expectRestartWritesNothing is scenario b: two subscriptions Ready (or the caller's subs),
// the manager (*mgr) restarted; the new one re-reads the account, creates, updates and deletes
// nothing, and each Secret still holds its registration's secret. Given subs, it waits for the
// account's requests to settle before the restart and after it, and returns the requests sent
// up to the restart (the first reconcile) and after it (the restart's resync).
func expectRestartWritesNothing(t *restTenant, mgr **runningManager, subs ...*hookv1.WebhookSubscription) (first, resync []core.Request) {
	GinkgoHelper()
	counted := len(subs) > 0
	if !counted {
		subs = []*hookv1.WebhookSubscription{t.sub("one", "https://hooks.example.com/one"), t.sub("two", "https://hooks.example.com/two")}
	}
	all := func() []core.Request { return t.requests("", "/") }
	for _, s := range subs {
		createReady(s)
		expectRESTSecret(t, s, get(Default, s).Status.EndpointID)
	}
	if counted {
		first = all()[:settled(func() int { return len(all()) })]
	}
	writes, lists := t.writes(), len(t.requests("GET", t.kind.collection(t)))
	(*mgr).Stop()
	*mgr = startManager(managerOptions{})
	Eventually(func() int { return len(t.requests("GET", t.kind.collection(t))) }).WithTimeout(20 * time.Second).Should(BeNumerically(">", lists))
	for _, s := range subs {
		expectReady(s)
	}
	Consistently(t.writes).WithTimeout(5*time.Second).Should(Equal(writes), "no create, update or delete after the restart")
	Expect(t.regs()).To(HaveLen(len(subs)))
	for _, s := range subs {
		expectRESTSecret(t, s, get(Default, s).Status.EndpointID)
	}
	if counted {
		resync = all()[len(first):settled(func() int { return len(all()) })]
	}
	return first, resync
}

// expectCrashAfterCreateRecovered is scenario c: *mgr stopped, a manager crashes right after
// the API created the registration; once *mgr runs again there is one registration and the
// Secret holds the secret it signs with (a client-chosen one was stored as pending first and
// is kept; a returned-once one is rotated make-before-break).
func expectCrashAfterCreateRecovered(t *restTenant, mgr **runningManager) {
	GinkgoHelper()
	(*mgr).Stop()
	s := t.sub("orders", "https://hooks.example.com/crash")
	createAndCrash(s)
	first := t.only()
	sec := signingSecret(Default, s)
	if t.kind.clientChosen {
		// A client-chosen secret (GitLab's token) was stored (pending) before the API heard of it.
		Expect(string(sec.Data[hookv1.SecretKeyPending])).To(Equal(first.Secret))
	} else {
		// The API (PagerDuty) showed the secret in the create answer only, and the process died
		// holding it: nothing stores it.
		for k, v := range sec.Data {
			Expect(string(v)).NotTo(Equal(first.Secret), "key %s", k)
		}
	}

	*mgr = startManager(managerOptions{})
	got := expectReady(s)
	r := t.only()
	Expect(got.Status.EndpointID).To(Equal(r.ID))
	expectRESTSecret(t, s, r.ID)
	if t.kind.clientChosen {
		// Same hook; the pending secret confirmed on it (set again, in place).
		Expect(r.ID).To(Equal(first.ID))
		Expect(r.Secret).To(Equal(first.Secret))
		Expect(t.creates()).To(Equal(1))
	} else {
		// The secret cannot be read back: rotated make-before-break, the first
		// subscription deleted once the new secret was stored.
		Expect(r.ID).NotTo(Equal(first.ID))
		Expect(t.creates()).To(Equal(2))
		Expect(t.requests("DELETE", t.item(first.ID))).To(HaveLen(1))
		Eventually(func(g Gomega) { g.Expect(hasEvent(g, s, hookv1.ReasonSecretRotated, r.ID)).To(BeTrue()) }).Should(Succeed())
	}
}

// expectLostCreateAnswers is scenario c2: a create the API applied but whose answer was lost
// (502), and one refused before it applied (500), each end with one registration and its
// secret; a client-chosen secret is not replaced by the retry.
func expectLostCreateAnswers(t *restTenant) {
	GinkgoHelper()
	collection := t.kind.collection(t)
	lost := t.api.fake().Inject(core.Fault{Method: "POST", PathPrefix: collection, Status: http.StatusBadGateway, Body: `{"message":"502 Bad Gateway"}`, AfterApply: true, Times: 1})
	defer lost()
	s := t.sub("lost", "https://hooks.example.com/lost")
	createReady(s)
	r := t.only()
	expectRESTSecret(t, s, r.ID)
	if t.kind.clientChosen {
		// The hook made with the pending secret is found by its marker and kept.
		Expect(t.creates()).To(Equal(1))
	} else {
		// The lost answer held the only copy of the secret: replaced, and the
		// unanswered subscription deleted.
		Expect(t.creates()).To(Equal(2))
		Expect(t.requests("DELETE", collection+"/")).To(HaveLen(1))
	}

	failed := t.api.fake().Inject(core.Fault{Method: "POST", PathPrefix: collection, Status: http.StatusInternalServerError, Body: `{"message":"500 Internal Server Error"}`, Times: 1})
	defer failed()
	s2 := t.sub("failed", "https://hooks.example.com/failed")
	id := createReady(s2).Status.EndpointID
	Expect(t.regs()).To(HaveLen(2))
	r2, _ := t.reg(id)
	Expect(r2.URL).To(Equal("https://hooks.example.com/failed"))
	expectRESTSecret(t, s2, id)
	if t.kind.clientChosen {
		// The retry reused the pending secret the failed create carried.
		var refused []core.Request
		for _, r := range t.requests("POST", collection) {
			if r.Status == http.StatusInternalServerError {
				refused = append(refused, r)
			}
		}
		Expect(refused).To(HaveLen(1))
		Expect(string(refused[0].Body)).To(ContainSubstring(`"` + t.kind.secretField + `":"` + r2.Secret + `"`))
	}
}

// expectTwinsPruned is scenario f: our marker on a canonically equal URL and an unmarked
// registration for our URL (adoption Adopt, the default) are twins and pruned; a near-twin is
// reported and another cluster's registration is left alone, neither touched.
func expectTwinsPruned(t *restTenant) {
	GinkgoHelper()
	s := t.sub("orders", "https://hooks.example.com/twins")
	got := createReady(s)
	kept := got.Status.EndpointID
	// Our marker on a canonically equal URL: a twin. Unmarked for exactly our URL:
	// taken as ours under adoption Adopt, so a twin too. A trailing slash and no
	// marker: a foreign near-twin. Our URL with another cluster's marker: provably
	// not ours, left alone.
	twin := restReg{URL: "https://HOOKS.example.com:443/twins", Events: t.kind.events, VerifySSL: true}
	t.kind.mark(&twin, t.owner(got))
	ours := t.api.seed(twin)
	unmarked := t.api.seed(restReg{URL: "https://hooks.example.com/twins", Events: t.kind.events[:1], VerifySSL: true})
	nearTwin := t.api.seed(restReg{URL: "https://hooks.example.com/twins/", Events: t.kind.events, VerifySSL: true})
	elsewhere := restReg{URL: "https://hooks.example.com/twins", Events: t.kind.events, VerifySSL: true}
	t.kind.mark(&elsewhere, providers.Owner{Cluster: "prod-eu", Namespace: t.ns, Name: "orders", UID: "0000"})
	theirs := t.api.seed(elsewhere)

	Eventually(func(g Gomega) {
		g.Expect(t.registrationIDs()).To(ConsistOf(kept, nearTwin, theirs))
		cur := get(g, s)
		g.Expect(cur.Status.EndpointID).To(Equal(kept))
		g.Expect(cur.Status.TwinsPruned).To(Equal(int32(2)))
		g.Expect(hasEvent(g, s, hookv1.ReasonTwinsPruned, ours)).To(BeTrue())
		g.Expect(hasEvent(g, s, hookv1.ReasonTwinsPruned, unmarked)).To(BeTrue())
		c := condition(cur, hookv1.ConditionTwinsFound)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(ContainSubstring(nearTwin))
		g.Expect(hasEvent(g, s, hookv1.ReasonNearTwinFound, nearTwin)).To(BeTrue())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	Expect(t.requests("", t.item(nearTwin))).To(BeEmpty(), "the near-twin is never touched")
	Expect(t.requests("", t.item(theirs))).To(BeEmpty(), "another cluster's registration is never touched")
	expectRESTSecret(t, s, kept)
	expectReady(s)
}

// expectForeignUntouched is scenario g: registrations on the account that are not ours
// (another cluster's marker, another URL, a hand-made one for a nearby URL) receive no request
// and stay as they were while ours is created.
func expectForeignUntouched(t *restTenant) {
	GinkgoHelper()
	// The same namespace and name in another cluster, someone else's hook, and an
	// unmarked one for a nearby URL.
	other := restReg{URL: "https://hooks.example.com/other-cluster", Events: t.kind.events, VerifySSL: true}
	t.kind.mark(&other, providers.Owner{Cluster: "prod-eu", Namespace: t.ns, Name: "orders", UID: "0000"})
	var foreign []string
	for _, r := range []restReg{other, {URL: "https://ci.example.com/hook", Events: []string{t.kind.otherEvent}}, {URL: "https://hooks.example.com/", Events: t.kind.events, Description: "hand-made"}} {
		foreign = append(foreign, t.api.seed(r))
	}
	before := map[string]restReg{}
	for _, r := range t.regs() {
		before[r.ID] = r
	}
	s := t.sub("orders", "https://hooks.example.com/mine")
	createReady(s)
	Consistently(func(g Gomega) {
		for _, id := range foreign {
			g.Expect(t.requests("", t.item(id))).To(BeEmpty())
			g.Expect(t.requests("", t.item(id)+"/")).To(BeEmpty())
		}
	}).WithTimeout(5 * time.Second).Should(Succeed())
	Expect(t.regs()).To(HaveLen(4))
	for _, id := range foreign {
		r, ok := t.reg(id)
		Expect(ok).To(BeTrue())
		Expect(r).To(Equal(before[id]))
	}
}

var _ = Describe("WebhookSubscription on REST profiles", Ordered, ContinueOnFailure, func() {
	var mgr *runningManager
	BeforeAll(func() {
		var stopGL, stopPD func()
		glURL, stopGL = glSrv.Start()
		DeferCleanup(stopGL)
		pdURL, stopPD = pdSrv.Start()
		DeferCleanup(stopPD)
		mgr = startManager(managerOptions{})
	})
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	for _, kind := range restKinds {
		Context(kind.name, func() {
			newT := func() *restTenant { return newRESTTenant(kind) }

			It("a: registers exactly one registration as the API wants it, stores the secret it signs with and becomes Ready", func() {
				t := newT()
				s := t.sub("orders", "https://Hooks.Example.com:443/hooks/shop/orders")
				_, r := expectRESTCreatedOnce(t, s)

				create := t.requests("POST", kind.collection(t))[0]
				if kind.clientChosen {
					// GitLab: every event flag sent (unsent flags keep GitLab's defaults), the
					// token ours, TLS verified; no ping request in the profile.
					Expect(create.Header.Get("PRIVATE-TOKEN")).To(Equal(t.cred))
					Expect(r.VerifySSL).To(BeTrue())
					for _, f := range gitlab.Events {
						Expect(string(create.Body)).To(ContainSubstring(`"`+f+`":`), "flag %s sent explicitly", f)
					}
					Expect(r.Description).To(Equal("orders pipeline"))
					Expect(get(Default, s).Status.Ping).To(BeNil())
				} else {
					// PagerDuty: the versioned Accept header, the service filter from the
					// parameters, and a ping asked for once.
					Expect(create.Header.Get("Accept")).To(Equal(pagerduty.Accept))
					Expect(create.Status).To(Equal(http.StatusOK))
					Expect(string(create.Body)).To(ContainSubstring(`"filter":{"id":"` + t.params["filterID"] + `","type":"service_reference"}`))
					Eventually(func(g Gomega) {
						p := get(g, s).Status.Ping
						g.Expect(p).NotTo(BeNil())
						g.Expect(p.EndpointID).To(Equal(r.ID))
						g.Expect(p.Result).To(Equal(hookv1.PingRequested))
					}).Should(Succeed())
					Expect(t.requests("POST", t.item(r.ID)+"/ping")).To(HaveLen(1))
				}
			})

			It("b: a restarted manager creates nothing and writes nothing: the profile has no conditional lists, every resync re-reads and finds nothing to change", func() {
				expectRestartWritesNothing(newT(), &mgr)
			})

			It("c: a crash after the API created the registration leaves one, and the Secret ends holding the secret it signs with", func() {
				expectCrashAfterCreateRecovered(newT(), &mgr)
			})

			It("c2: a create whose answer was lost, and one that failed before the API saw it, each end with one registration and its secret", func() {
				expectLostCreateAnswers(newT())
			})

			It("d: status cleared by hand is taken back by its marker, without a create", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/cleared")
				s.Spec.Policies.Adoption = hookv1.AdoptionNever // the proof is the marker, not adoption
				// Nothing created, updated or deleted.
				expectStatusClearedTakenBack(t, s, t.writes)
				expectRESTSecret(t, s, get(Default, s).Status.EndpointID)
			})

			It("e: repairs out-of-band edits: a deleted registration is recreated; drifted fields are fixed in place, a drifted URL as the profile's update strategy allows", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/oob")
				id := expectRemovedRecreated(t, s)

				// Events, description (with the marker), and what else the profile compares.
				secret, creates := t.only().Secret, t.creates()
				Expect(t.api.edit(id, func(r *restReg) {
					r.Events, r.Description, r.Name, r.Disabled, r.VerifySSL = []string{kind.otherEvent}, "edited by hand", "edited by hand", true, false
				})).To(BeTrue())
				Eventually(func(g Gomega) {
					rs := t.regs()
					g.Expect(rs).To(HaveLen(1))
					r := rs[0]
					g.Expect(r.ID).To(Equal(id), "updated in place")
					g.Expect(r.Events).To(ConsistOf(kind.events))
					g.Expect(kind.marked(r, t.owner(get(g, s)))).To(BeTrue(), "marker restored: %+v", r)
					g.Expect(r.Disabled).To(BeFalse())
					g.Expect(r.Secret).To(Equal(secret), "the secret survives the update")
					if kind.clientChosen {
						g.Expect(r.Description).To(Equal("orders pipeline"))
						g.Expect(r.VerifySSL).To(BeTrue(), "TLS verification switched back on")
					} else {
						g.Expect(r.Description).To(Equal("orders pipeline [" + marker(t.owner(get(g, s))) + "]"))
					}
				}).WithTimeout(20 * time.Second).Should(Succeed())
				Expect(t.creates()).To(Equal(creates))
				Expect(t.requests("PUT", t.item(id))).NotTo(BeEmpty())
				expectRESTSecret(t, s, id)

				// The URL respelt (canonically the same): GitLab takes it in place, and the
				// update resends the token (GitLab resets it when the URL changes); PagerDuty
				// cannot update a delivery URL, so the subscription is replaced.
				Expect(t.api.edit(id, func(r *restReg) { r.URL = "https://HOOKS.example.com:443/oob" })).To(BeTrue())
				Eventually(func(g Gomega) {
					rs := t.regs()
					g.Expect(rs).To(HaveLen(1))
					g.Expect(rs[0].URL).To(Equal("https://hooks.example.com/oob"))
					if kind.clientChosen {
						g.Expect(rs[0].ID).To(Equal(id))
						g.Expect(rs[0].Secret).To(Equal(secret), "the token was sent with the new URL")
					} else {
						g.Expect(rs[0].ID).NotTo(Equal(id))
					}
					g.Expect(get(g, s).Status.EndpointID).To(Equal(rs[0].ID))
				}).WithTimeout(20 * time.Second).Should(Succeed())
				for _, r := range t.requests("PUT", t.item(id)) {
					Expect(string(r.Body)).NotTo(ContainSubstring("delivery_method"), "never asks PagerDuty to update what it cannot")
				}
				expectRESTSecret(t, s, t.only().ID)
				expectReady(s)
			})

			It("f: prunes proven twins; near-twins (reported) and other owners' registrations are never touched", func() {
				expectTwinsPruned(newT())
			})

			It("g: never changes foreign registrations on the account", func() {
				expectForeignUntouched(newT())
			})

			It("h: a changed URL gets a new registration, the old one is removed and the Secret follows", func() {
				t := newT()
				s, old, id := expectURLChangeFollowed(t)
				Expect(t.requests("DELETE", t.item(old))).To(HaveLen(1))
				expectRESTSecret(t, s, id)
				expectReady(s)
			})

			It("i: rides out the API's rate-limit answer as RateLimited and ends Ready with one registration", func() {
				t := newT()
				f := kind.rateLimit()
				f.PathPrefix, f.Times = kind.collection(t), 2
				remove := t.api.fake().Inject(f)
				defer remove()
				s := t.sub("orders", "https://hooks.example.com/storm")
				expectRateLimitedThenReady(s)
				limited := 0
				for _, r := range t.requests("POST", kind.collection(t)) {
					if r.Status == http.StatusTooManyRequests {
						limited++
					}
				}
				Expect(limited).To(Equal(2))
				Expect(t.creates()).To(Equal(1))
				expectRESTSecret(t, s, t.only().ID)
			})

			It("j: deletion honours the policy, and missing credentials block it visibly", func() {
				expectDeletionPolicies(newT())
			})

			It("l: a registration whose URL and events were edited at the API is repaired in place where the URL can change, else replaced", func() {
				t := newT()
				// GitLab updates a hook's URL in place; PagerDuty cannot change a delivery URL.
				expectMovedOutOfBandRepaired(t, t.creates, kind.clientChosen, func(id string) {
					Expect(t.api.edit(id, func(r *restReg) { r.URL, r.Events = "https://elsewhere.example.com/hooks", []string{kind.otherEvent} })).To(BeTrue())
				})
			})

			It("k: a deleted signing Secret is repaired as the secret mode allows", func() {
				t := newT()
				s := t.sub("orders", "https://hooks.example.com/secret")
				id := createReady(s).Status.EndpointID
				old, creates := t.only().Secret, t.creates()
				deleteSigningSecret(s)
				Eventually(func(g Gomega) {
					rs := t.regs()
					g.Expect(rs).To(HaveLen(1))
					g.Expect(rs[0].Secret).NotTo(Equal(old), "a new secret")
					if kind.clientChosen {
						g.Expect(rs[0].ID).To(Equal(id), "GitLab: a new token set on the same hook")
					} else {
						g.Expect(rs[0].ID).NotTo(Equal(id), "PagerDuty: a new subscription, the old one deleted")
					}
					g.Expect(string(signingSecret(g, s).Data[hookv1.SecretKeyCurrent])).To(Equal(rs[0].Secret))
					g.Expect(hasEvent(g, s, hookv1.ReasonSecretRotated, id)).To(BeTrue())
				}).WithTimeout(20 * time.Second).Should(Succeed())
				r := t.only()
				expectRESTSecret(t, s, r.ID)
				if kind.clientChosen {
					Expect(t.creates()).To(Equal(creates))
					Expect(t.requests("PUT", t.item(id))).To(HaveLen(1))
				} else {
					Expect(t.creates()).To(Equal(creates + 1))
					Expect(t.requests("DELETE", t.item(id))).To(HaveLen(1))
				}
				expectReady(s)
			})

			It("bad input: an invalid profile stalls naming the field before anything is sent, and an HTML list stalls without a write", func() {
				t := newT()
				key := client.ObjectKey{Namespace: t.ns, Name: restProfiles}
				cm := &corev1.ConfigMap{}
				Expect(k8s.Get(suiteCtx, key, cm)).To(Succeed())
				valid := cm.Data[kind.profile+".yaml"]
				Expect(valid).To(ContainSubstring("  pagination:"))
				setProfile := func(text string) {
					GinkgoHelper()
					Expect(k8s.Get(suiteCtx, key, cm)).To(Succeed())
					cm.Data[kind.profile+".yaml"] = text
					Expect(k8s.Update(suiteCtx, cm)).To(Succeed())
				}
				stalledWith := func(s *hookv1.WebhookSubscription, want string) {
					GinkgoHelper()
					Eventually(func(g Gomega) {
						c := condition(get(g, s), hookv1.ConditionStalled)
						g.Expect(c).NotTo(BeNil(), "Stalled")
						g.Expect(c.Message).To(ContainSubstring(want))
					}).WithTimeout(20 * time.Second).Should(Succeed())
				}

				// A misspelt field: strict decoding names it with its path; not one request.
				setProfile(strings.Replace(valid, "  pagination:", "  paginaton:", 1))
				s := t.sub("orders", "https://hooks.example.com/bad-input")
				Expect(k8s.Create(suiteCtx, s)).To(Succeed())
				stalledWith(s, `list.paginaton`)
				Expect(t.requests("", t.kind.collection(t))).To(BeEmpty(), "nothing sent with an invalid profile")
				Expect(t.requests("", t.kind.collection(t)+"/")).To(BeEmpty())
				Expect(t.regs()).To(BeEmpty())

				// The profile fixed in its ConfigMap: the metadata watch wakes the subscription.
				setProfile(valid)
				id := expectReady(s).Status.EndpointID
				Expect(t.creates()).To(Equal(1))
				writes := t.writes()

				// A proxy's login page in place of the list: stalled, nothing created or deleted.
				remove := t.api.fake().Inject(core.Fault{Method: http.MethodGet, PathPrefix: t.kind.collection(t), Status: http.StatusOK,
					ContentType: "text/html", Body: "<html><body>Sign in</body></html>"})
				stalledWith(s, "HTML")
				Expect(t.writes()).To(Equal(writes), "no write on a list that could not be read")
				Expect(t.registrationIDs()).To(Equal([]string{id}))
				remove()
				Expect(expectReady(s).Status.EndpointID).To(Equal(id))
				Expect(t.writes()).To(Equal(writes))
			})
		})
	}

	It("a refusal is a stall: a refused list, create, update or delete sends nothing more until something changes or the resync interval passes, on GitLab, GitHub and Stripe", func() {
		expectRefusalsStall(restKinds[0])
	})

	It("never writes a REST credential or signing secret into logs, events or status", func() {
		secrets := map[string]bool{}
		var all corev1.SecretList
		Expect(k8s.List(suiteCtx, &all)).To(Succeed())
		for _, c := range all.Items {
			if !strings.HasPrefix(c.Namespace, "gl") && !strings.HasPrefix(c.Namespace, "pd") {
				continue
			}
			for k, v := range c.Data {
				if s := strings.TrimSpace(string(v)); k != hookv1.SecretKeyVerifier && len(s) >= 16 {
					secrets[s] = true
				}
			}
		}
		expectSecretsNeverShown(secrets)
	})
})
