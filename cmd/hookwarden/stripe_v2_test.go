package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// TestStripeV2: plan, import and status of Stripe v2 event destinations beside v1 endpoints on
// one account, as during Stripe's migration. The fake shows v1 endpoints in the v2 list too
// (which Stripe neither promises nor rules out): a v1 endpoint and a v2 destination on one URL
// are never twins, and each is planned and imported only by subscriptions of its own kind.
func TestStripeV2(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "stripev2")
	// This test's own fake: WithV1InV2List changes what v2 lists show.
	srv := stripefake.New(stripefake.WithV1InV2List(), stripefake.WithPageSize(3))
	base, stopSrv := srv.Start()
	t.Cleanup(stopSrv)
	onSrv := func(s *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
		s.Spec.Provider.APIURL = base
		return s
	}
	v2 := func(s *hookv1.WebhookSubscription, payload hookv1.StripeEventPayload) *hookv1.WebhookSubscription {
		s.Spec.Provider.Stripe = &hookv1.StripeProvider{APIVersion: hookv1.StripeV2, EventPayload: payload}
		return s
	}

	// One URL, a v1 endpoint and a v2 thin destination (two subscriptions); billing is v1 only.
	const orders, billing = "https://hooks.example.com/orders", "https://hooks.example.com/billing"
	ordersV1 := onSrv(tn.stripeSub("orders-v1", orders, "invoice.paid"))
	ordersV2 := v2(onSrv(tn.stripeSub("orders-v2", orders, "invoice.paid")), "")
	billingV1 := onSrv(tn.stripeSub("billing", billing, "invoice.paid"))
	for _, s := range []*hookv1.WebhookSubscription{ordersV1, ordersV2, billingV1} {
		g.Expect(env.Client.Create(ctx, s.DeepCopy())).To(Succeed())
	}
	stop := startManager(t)
	liveV1, liveV2, liveBilling := expectReady(g, ordersV1), expectReady(g, ordersV2), expectReady(g, billingV1)
	stop()
	g.Expect(srv.Endpoints(tn.apiKey)).To(HaveLen(2), "orders' v1 endpoint and billing's")
	g.Expect(srv.Destinations(tn.apiKey)).To(HaveLen(1), "orders' v2 destination, not pruned as a twin of the v1 endpoint")
	g.Expect(liveV2.Status.EndpointID).To(HavePrefix("ed_"))
	g.Expect(liveV1.Status.EndpointID).To(HavePrefix("we_"))

	// Out of band, by hand: a thin destination for billing's URL (a migration begun in
	// Workbench), a snapshot one, and a v1 endpoint of another tool.
	byHand := srv.SeedDestination(tn.apiKey, stripefake.Destination{URL: billing, EnabledEvents: []string{"invoice.paid"}})
	snapshot := srv.SeedDestination(tn.apiKey, stripefake.Destination{URL: "https://hooks.example.com/snap", EventPayload: "snapshot", EnabledEvents: []string{"invoice.paid"}})
	legacy := srv.Seed(tn.apiKey, stripefake.Endpoint{URL: "https://hooks.example.com/legacy", EnabledEvents: []string{"customer.created"}})

	// status: the two subscriptions on one URL read apart, each with its own registration.
	code, stdout, stderr := run(t, nil, "status", "-n", tn.ns)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	t.Logf("REPORT status of v1 and v2 on one URL:\n%s", stdout)
	g.Expect(stdout).To(ContainSubstring("stripev2/orders-v1  stripe  Ready=True"))
	g.Expect(stdout).To(ContainSubstring("stripev2/orders-v2  stripe v2/thin  Ready=True"))
	g.Expect(stdout).To(ContainSubstring("registration " + liveV1.Status.EndpointID + "  " + orders))
	g.Expect(stdout).To(ContainSubstring("registration " + liveV2.Status.EndpointID + "  " + orders))

	// plan of the cluster: nothing to do for either, only reads.
	srv.ResetRequests()
	code, stdout, stderr = run(t, nil, "plan", "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitOK), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).To(MatchRegexp(`stripev2/orders-v1\s+stripe\s+keep\s+nothing\s+` + liveV1.Status.EndpointID))
	g.Expect(stdout).To(MatchRegexp(`stripev2/orders-v2\s+stripe v2/thin\s+keep\s+nothing\s+` + liveV2.Status.EndpointID))
	g.Expect(stdout).NotTo(ContainSubstring("prune"))
	lists := map[string]int{}
	for _, r := range srv.Requests() {
		g.Expect(r.Method).To(Equal("GET"), "Stripe %s %s", r.Method, r.Path)
		lists[r.Path]++
	}
	t.Logf("REPORT plan of a v1 and a v2 subscription on one account: %v", lists)
	g.Expect(lists).To(HaveKey("/v1/webhook_endpoints"))
	g.Expect(lists).To(HaveKey("/v2/core/event_destinations"))

	// plan of new manifests: a v2 subscription for the legacy v1 endpoint's URL creates a
	// destination (the endpoint is not its to adopt); a v1 one adopts it. For the URL of the
	// destination made by hand, the other way round.
	legacyV1 := onSrv(tn.stripeSub("legacy-v1", legacy.URL, "customer.created"))
	legacyV2 := v2(onSrv(tn.stripeSub("legacy-v2", legacy.URL, "customer.created")), hookv1.StripeThin)
	handV2 := v2(onSrv(tn.stripeSub("hand-v2", billing, "invoice.paid")), "")
	file := filepath.Join(t.TempDir(), "new.yaml")
	writeManifests(t, file, legacyV1, legacyV2, handV2)
	code, stdout, stderr = run(t, nil, "plan", "-f", file, "-n", tn.ns, "--cluster-name", clusterName)
	t.Logf("REPORT plan of new v1 and v2 manifests:\n%s", stdout)
	g.Expect(code).To(Equal(cli.ExitPending), "stdout: %s stderr: %s", stdout, stderr)
	rows := planRows(stdout)
	g.Expect(rows["stripev2/legacy-v1"]).To(ContainSubstring(legacy.ID), "the v1 subscription adopts the v1 endpoint")
	g.Expect(rows["stripev2/legacy-v2"]).To(MatchRegexp(`^stripe v2/thin\s+create\s+create\s+-\s+create a registration for ` + regexp.QuoteMeta(legacy.URL)))
	g.Expect(rows["stripev2/legacy-v2"]).NotTo(ContainSubstring(legacy.ID))
	g.Expect(rows["stripev2/hand-v2"]).To(ContainSubstring(byHand.ID), "the v2 subscription adopts the destination made by hand")
	g.Expect(rows["stripev2/hand-v2"]).NotTo(ContainSubstring(liveBilling.Status.EndpointID), "billing's v1 endpoint is not a twin of it")
	// billing, the v1 subscription on that URL, still keeps its endpoint alone: the
	// destination made by hand is not its twin.
	code, stdout, stderr = run(t, nil, "plan", "-n", tn.ns, "--cluster-name", clusterName, "-l", "app=billing")
	g.Expect(code).To(Equal(cli.ExitOK), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).NotTo(ContainSubstring(byHand.ID))

	// import of v2 thin destinations: the one made by hand (though billing serves its URL on
	// v1), not the v1 endpoints the v2 list shows, not the snapshot destination, not orders-v2's.
	srv.ResetRequests()
	code, v2YAML, stderr := run(t, nil, "import", "--provider", "stripe", "--stripe-api-version", "v2", "--credentials", "stripe-api", "--api-url", base, "-n", tn.ns, "--cluster-name", clusterName)
	t.Logf("REPORT import --stripe-api-version v2:\n%s", stderr)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stderr).To(ContainSubstring("imported " + byHand.ID + " (" + billing + ") as stripev2/stripe-" + strings.ToLower(strings.ReplaceAll(byHand.ID, "_", "-"))))
	g.Expect(stderr).To(ContainSubstring("skipped " + legacy.ID + " (" + legacy.URL + "): a v1 registration, another kind than this import's v2/thin ones"))
	g.Expect(stderr).To(ContainSubstring("skipped " + liveBilling.Status.EndpointID + " (" + billing + "): a v1 registration"))
	g.Expect(stderr).To(ContainSubstring("skipped " + snapshot.ID + " (" + snapshot.URL + "): a v2/snapshot registration"))
	g.Expect(stderr).To(ContainSubstring("skipped " + liveV2.Status.EndpointID + " (" + orders + "): already owned by stripev2/orders-v2"))
	g.Expect(strings.Count(v2YAML, "kind: WebhookSubscription")).To(Equal(1), v2YAML)
	g.Expect(v2YAML).To(ContainSubstring("stripe:\n      apiVersion: v2"))
	for _, r := range srv.Requests() {
		g.Expect(r.Method).To(Equal("GET"), "Stripe %s %s", r.Method, r.Path)
	}

	// import of v1 endpoints: the legacy one; no destination, and orders-v2's URL is not
	// offered as a twin of anything.
	code, v1YAML, stderr := run(t, nil, "import", "--provider", "stripe", "--credentials", "stripe-api", "--api-url", base, "-n", tn.ns, "--cluster-name", clusterName)
	t.Logf("REPORT import (v1):\n%s", stderr)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stderr).To(ContainSubstring("imported " + legacy.ID + " (" + legacy.URL + ")"))
	g.Expect(stderr + v1YAML).NotTo(ContainSubstring("ed_"))
	g.Expect(strings.Count(v1YAML, "kind: WebhookSubscription")).To(Equal(1), v1YAML)
	g.Expect(v1YAML).NotTo(ContainSubstring("apiVersion: v2"))

	// The payload flag is for v2, and the Stripe flags for Stripe.
	code, _, stderr = run(t, nil, "import", "--provider", "stripe", "--stripe-event-payload", "snapshot", "--credentials", "stripe-api", "-n", tn.ns)
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	code, _, stderr = run(t, nil, "import", "--provider", "github", "--stripe-api-version", "v2", "--credentials", "github-api", "-n", tn.ns)
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
}

// planRows are a plan table's rows by subscription: each row's cells after the first, joined
// by single spaces, continuation rows appended.
func planRows(table string) map[string]string {
	out := map[string]string{}
	last := ""
	for _, line := range strings.Split(table, "\n")[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			name, rest, _ := strings.Cut(line, " ")
			last = name
			out[last] = strings.TrimSpace(rest)
			continue
		}
		out[last] += " | " + strings.TrimSpace(line)
	}
	return out
}
