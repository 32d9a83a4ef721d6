package controllers_test

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/core"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// requestNow asks for a reconcile that reads the provider afresh (the Flux annotation).
func requestNow(s *hookv1.WebhookSubscription) {
	GinkgoHelper()
	at := strconv.FormatInt(time.Now().UnixNano(), 10)
	Expect(k8s.Patch(suiteCtx, s, client.RawPatch(client.Merge.Type(), fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, hookv1.AnnotationReconcileRequestedAt, at)))).To(Succeed())
}

// expectMovedOutOfBandRepaired is scenario l: someone edits the registration's URL and events
// at the provider, the spec unchanged. move makes the edit on registration id. inPlace says
// the provider can change a URL in place: then the same registration is updated back (same id,
// no create); otherwise it is replaced make-before-break (one new registration, the moved one
// deleted).
func expectMovedOutOfBandRepaired(t scenarioTenant, creates func() int, inPlace bool, move func(id string)) {
	const spec = "https://hooks.example.com/moved"
	s := t.sub("moved", spec)
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	id := expectReady(s).Status.EndpointID
	before := creates()
	move(id)
	Expect(t.registrations()).To(HaveKeyWithValue(id, Not(Equal(spec))), "the edit reached the provider")
	requestNow(s)
	Eventually(func(g Gomega) {
		regs := t.registrations()
		g.Expect(regs).To(HaveLen(1))
		got := get(g, s)
		g.Expect(regs).To(HaveKeyWithValue(got.Status.EndpointID, spec))
		if inPlace {
			g.Expect(got.Status.EndpointID).To(Equal(id), "repaired in place: the id and the delivery history stay")
		} else {
			g.Expect(got.Status.EndpointID).NotTo(Equal(id))
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
	expectReady(s)
	if inPlace {
		Expect(creates()).To(Equal(before), "no create for an edit the provider can undo in place")
	} else {
		Expect(creates()).To(Equal(before + 1))
	}
}

// refusal is one subscription whose provider refuses one operation for good, and the count of
// every request its account receives.
type refusal struct {
	provider, op string
	sub          *hookv1.WebhookSubscription
	requests     func() int
}

// slowResync keeps the resync interval out of the count window: a stall is looked at again
// once per resync interval, and nothing else may send a request.
func slowResync(s *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
	s.Spec.ResyncInterval = &metav1.Duration{Duration: 10 * time.Minute}
	return s
}

// expectRefusalsStall: a refused list, create, update and delete, on every provider, stall the
// subscription and send nothing more for a minute (the resync interval is ten): no request
// until something changes or the resync interval passes.
func expectRefusalsStall(glKind *restKind) {
	insufficientScope := `{"error":"insufficient_scope","error_description":"The request requires higher privileges than provided by the access token.","scope":"api"}`
	var all []refusal
	// GitLab: a token that may read hooks but not write them, or not even read.
	for _, op := range []string{"list", "create", "update", "delete"} {
		t := newRESTTenant(glKind)
		s := slowResync(t.sub("refused-"+op, "https://hooks.example.com/refused/"+op))
		refuse := func(method, path string) {
			t.api.fake().Inject(core.Fault{Method: method, PathPrefix: path, Status: http.StatusForbidden, Body: insufficientScope})
		}
		all = append(all, refusal{provider: "gitlab", op: op, sub: s, requests: func() int { return len(t.requests("", "/")) }})
		setUp(op, s, func(method string) {
			path := t.kind.collection(t)
			if method != http.MethodGet && method != http.MethodPost {
				path += "/" + get(Default, s).Status.EndpointID
			}
			refuse(method, path)
		}, func(id string) { t.api.edit(id, func(r *restReg) { r.Events = []string{t.kind.otherEvent} }) })
	}
	// GitHub: a token without write access to the repository's hooks.
	for _, op := range []string{"list", "create", "update", "delete"} {
		t := newGHTenant(true)
		s := slowResync(t.sub("refused-"+op, "https://hooks.example.com/refused/"+op))
		all = append(all, refusal{provider: "github", op: op, sub: s, requests: func() int { return len(t.requests("")) }})
		setUp(op, s, func(method string) {
			path := "/" + t.target + "/hooks"
			if method != http.MethodGet && method != http.MethodPost {
				path += "/" + get(Default, s).Status.EndpointID
			}
			ghSrv.Inject(ghfake.Fault{Method: method, PathPrefix: path, Status: http.StatusForbidden, Message: "Resource not accessible by personal access token"})
		}, func(id string) {
			n, _ := strconv.ParseInt(id, 10, 64)
			ghSrv.Edit(t.target, n, func(h *ghfake.Hook) { h.Events = []string{"issues"} })
		})
	}
	// Stripe: a restricted key without the permission.
	for _, op := range []string{"list", "create", "update", "delete"} {
		t := newTenant()
		s := slowResync(t.sub("refused-"+op, "https://hooks.example.com/refused/"+op))
		all = append(all, refusal{provider: "stripe", op: op, sub: s, requests: func() int { return len(t.requests("", "/")) }})
		setUp(op, s, func(method string) {
			path := "/v1/webhook_endpoints"
			if method != http.MethodGet && (method != http.MethodPost || op != "create") {
				path += "/" + get(Default, s).Status.EndpointID
			}
			t.srv.Inject(fake.Fault{Method: method, PathPrefix: path, APIKey: t.apiKey, Status: http.StatusForbidden,
				Message: "The provided key does not have the required permissions for this endpoint."})
		}, func(id string) {
			t.srv.Edit(t.apiKey, id, func(e *fake.Endpoint) { e.EnabledEvents = []string{"charge.refunded"} })
		})
	}

	// Every one stalls (deletion: the finalizer stays and says why).
	for _, r := range all {
		Eventually(func(g Gomega) {
			c := condition(get(g, r.sub), hookv1.ConditionStalled)
			g.Expect(c).NotTo(BeNil(), "%s %s", r.provider, r.op)
			g.Expect(c.Reason).To(Equal(hookv1.ReasonUnauthorized), "%s %s: %s", r.provider, r.op, c.Message)
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	start := make([]int, len(all))
	for i, r := range all {
		start[i] = r.requests()
	}
	sent := func() []int {
		out := make([]int, len(all))
		for i, r := range all {
			out[i] = r.requests() - start[i]
		}
		return out
	}
	Consistently(func(g Gomega) {
		for i, n := range sent() {
			g.Expect(n).To(BeZero(), "%s %s: %d requests after the refusal", all[i].provider, all[i].op, n)
		}
	}).WithTimeout(time.Minute).WithPolling(5 * time.Second).Should(Succeed())
	for i, n := range sent() {
		AddReportEntry("refusal", fmt.Sprintf("REPORT refusal %-7s refused %-6s: %d requests in the minute after the stall (resync interval 10m)", all[i].provider, all[i].op, n))
		fmt.Fprintf(GinkgoWriter, "REPORT refusal %-7s refused %-6s: %d requests in the minute after the stall\n", all[i].provider, all[i].op, n)
	}
}

// setUp brings s to the refusal of op: refuse(method) makes the provider refuse that method
// from then on; drift edits registration id out of band so that an update is needed.
func setUp(op string, s *hookv1.WebhookSubscription, refuse func(method string), drift func(id string)) {
	GinkgoHelper()
	switch op {
	case "list":
		refuse(http.MethodGet)
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	case "create":
		refuse(http.MethodPost)
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	case "update":
		id := createReady(s).Status.EndpointID
		method := http.MethodPut // GitLab
		switch s.Spec.Provider.Type {
		case hookv1.ProviderGitHub:
			method = http.MethodPatch
		case hookv1.ProviderStripe:
			method = http.MethodPost
		}
		refuse(method)
		drift(id)
		requestNow(s)
	case "delete":
		createReady(s)
		refuse(http.MethodDelete)
		Expect(k8s.Delete(suiteCtx, s)).To(Succeed())
	}
}
