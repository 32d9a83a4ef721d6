package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/internal/testtier"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// TestRecoverResumes: a recovery request nobody has handled yet times out (exit 4) with the
// annotation set; the next run follows the same request instead of making a new one. (The
// manager's side, status.recovery, is written by the missed-events work.)
func TestRecoverResumes(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "recover")
	sub := tn.stripeSub("orders", "https://hooks.example.com/orders", "invoice.paid")
	g.Expect(env.Client.Create(ctx, sub.DeepCopy())).To(Succeed())

	code, _, stderr := run(t, nil, "recover", "orders", "-n", tn.ns, "--timeout", "1s", "--poll-interval", "100ms")
	g.Expect(code).To(Equal(cli.ExitTimeout), stderr)
	g.Expect(stderr).To(ContainSubstring("recover/orders: recovery requested"))
	live := &hookv1.WebhookSubscription{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), live)).To(Succeed())
	requested := live.Annotations[cli.AnnotationRecoverRequestedAt]
	g.Expect(requested).NotTo(BeEmpty())

	code, _, stderr = run(t, nil, "recover", "-n", tn.ns, "-l", "app=orders", "--timeout", "1s", "--poll-interval", "100ms")
	g.Expect(code).To(Equal(cli.ExitTimeout), stderr)
	g.Expect(stderr).To(ContainSubstring("a recovery requested at " + requested + " is still pending: following it"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), live)).To(Succeed())
	g.Expect(live.Annotations[cli.AnnotationRecoverRequestedAt]).To(Equal(requested))
}

// TestRecoverFollowsTheManagersRun: events Stripe failed to deliver while the endpoint answered
// 503 come back through `hookwarden recover`: the manager's run hands each to the endpoint once,
// signed as Stripe signs, and the command prints the run's figures.
func TestRecoverFollowsTheManagersRun(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	tn := newTenant(t, g, "recover-run")
	var mu sync.Mutex
	down, got := true, map[string]int{}
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed) // the manager's reachability probe
			return
		}
		var ev struct {
			ID string `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &ev)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case down:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.Header.Get("Stripe-Signature") == "":
			w.WriteHeader(http.StatusBadRequest)
		case got[ev.ID] > 0:
			got[ev.ID]++
			w.WriteHeader(http.StatusOK)
		default:
			got[ev.ID]++
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer endpoint.Close()
	_, stop := manualRecovery(t, g, tn, "orders", endpoint.URL, "invoice.paid")
	defer stop()

	var ids []string
	for range 3 {
		ids = append(ids, stripeSrv.Emit(tn.apiKey, "invoice.paid", map[string]any{"object": "invoice"}).ID)
	}
	mu.Lock()
	down = false
	mu.Unlock()

	code, stdout, stderr := run(t, nil, "recover", "orders", "-n", tn.ns, "-o", "json", "--timeout", "2m", "--poll-interval", "200ms")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	var runs []map[string]any
	g.Expect(json.Unmarshal([]byte(stdout), &runs)).To(Succeed(), stdout)
	g.Expect(runs).To(HaveLen(1))
	g.Expect(runs[0]).To(HaveKeyWithValue("recovered", BeNumerically("==", 3)), stdout)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		g.Expect(got).To(HaveKeyWithValue(id, 1), "event %s at the endpoint", id)
	}
}

// TestRecoverReportsAFailedRun: with Stripe's events list answering 500, the manager's run ends
// Failed; `hookwarden recover` prints that result and the run's message, and exits 1, not "0
// recovered" and 0.
func TestRecoverReportsAFailedRun(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "recover-failed")
	// A healthy endpoint on loopback: the run fails at Stripe, not at the endpoint.
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed) // the manager's reachability probe; nothing is delivered
	}))
	defer endpoint.Close()
	sub, stop := manualRecovery(t, g, tn, "refunds", endpoint.URL, "charge.refunded")
	defer stop()
	remove := stripeSrv.Inject(stripefake.Fault{Method: "GET", PathPrefix: "/v1/events", APIKey: tn.apiKey, Status: 500})
	defer remove()
	before := stripeSrv.CountRequests("GET", "/v1/events")

	code, stdout, stderr := run(t, nil, "recover", "refunds", "-n", tn.ns, "--timeout", "2m", "--poll-interval", "200ms")
	t.Logf("REPORT recover exit %d, Stripe event lists %d\nstdout:\n%s\nstderr:\n%s", code, stripeSrv.CountRequests("GET", "/v1/events")-before, stdout, stderr)
	live := &hookv1.WebhookSubscription{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), live)).To(Succeed())
	g.Expect(live.Status.Recovery).NotTo(BeNil())
	g.Expect(live.Status.Recovery.LastRun).NotTo(BeNil())
	g.Expect(live.Status.Recovery.LastRun.Result).To(Equal(hookv1.RecoveryFailed))
	g.Expect(code).To(Equal(cli.ExitError), stderr)
	g.Expect(stdout).To(MatchRegexp(`recover-failed/refunds\s+Failed\s+0\s+0\s+0`))
	g.Expect(live.Status.Recovery.LastRun.Message).To(ContainSubstring("500"))
	g.Expect(stdout).To(ContainSubstring(live.Status.Recovery.LastRun.Message))
	g.Expect(stderr).To(ContainSubstring("1 of 1 recoveries did not succeed: recover-failed/refunds Failed"))
}

// manualRecovery makes a Stripe subscription with recovery Manual for the local endpoint at
// base, and a manager that brings it to Ready (stop it when done).
func manualRecovery(t *testing.T, g *WithT, tn *tenant, name, base string, events ...string) (*hookv1.WebhookSubscription, func()) {
	sub := tn.stripeSub(name, base+"/hooks/"+tn.ns+"/"+name, events...)
	sub.Spec.Endpoint.AllowInsecureHTTP = true
	sub.Spec.Recovery = hookv1.RecoverySpec{Mode: hookv1.RecoveryManual}
	g.Expect(env.Client.Create(context.Background(), sub.DeepCopy())).To(Succeed())
	stop := startManager(t)
	expectReady(g, sub)
	return sub, stop
}
