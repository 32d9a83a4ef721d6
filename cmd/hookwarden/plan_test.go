package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/controllers"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/stripe"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// TestPlan: a spec edit, a twin, a new subscription, an unmarked registration to adopt and an
// unchanged GitHub hook, planned from a manifest file against the recorded state the manager
// left; every request the plan sends (the API server, Stripe, GitHub) is a read.
func TestPlan(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "plan")

	orders := tn.stripeSub("orders", "https://hooks.example.com/orders", "checkout.session.completed", "invoice.paid")
	repo := tn.githubSub("repo", "https://hooks.example.com/repo", "push")
	for _, s := range []*hookv1.WebhookSubscription{orders, repo} {
		g.Expect(env.Client.Create(ctx, s.DeepCopy())).To(Succeed())
	}
	stop := startManager(t)
	liveOrders := expectReady(g, orders)
	liveRepo := expectReady(g, repo)
	stop()

	// Out of band: an unmarked twin of orders (created earlier), and an endpoint of another tool
	// for the URL a new manifest names.
	twin := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{ID: "we_twinorders", URL: "https://hooks.example.com/orders", EnabledEvents: []string{"invoice.paid", "checkout.session.completed"}})
	stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{ID: "we_legacy", URL: "https://hooks.example.com/legacy", EnabledEvents: []string{"customer.created"}, Description: "legacy pipeline"})

	edited := orders.DeepCopy()
	edited.Spec.Description = "orders pipeline v2"
	edited.Spec.Events = append(edited.Spec.Events, "charge.refunded")
	billing := tn.stripeSub("billing", "https://hooks.example.com/billing", "invoice.paid")
	legacy := tn.stripeSub("legacy", "https://hooks.example.com/legacy", "customer.created")
	manifests := filepath.Join(t.TempDir(), "subscriptions.yaml")
	writeManifests(t, manifests, edited, repo, billing, legacy)

	stripeSrv.ResetRequests()
	ghSrv.ResetRequests()
	var kube requestLog
	code, stdout, stderr := run(t, &kube, "plan", "-f", manifests, "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitPending), "stderr: %s", stderr)
	subst := map[string]string{
		liveOrders.Status.EndpointID: "<orders-id>",
		liveRepo.Status.EndpointID:   "<hook-id>",
		string(liveOrders.UID):       "<orders-uid>",
		stripeURL:                    "<stripe>",
		ghURL:                        "<github>",
	}
	golden(t, "plan.txt", stdout, subst)
	g.Expect(stderr).To(ContainSubstring("planning plan/orders (1/4): listing the stripe account"))

	// Nothing but reads, and the reads did happen.
	stripeReqs := stripeSrv.Requests()
	g.Expect(stripeReqs).NotTo(BeEmpty())
	for _, r := range stripeReqs {
		g.Expect(r.Method).To(Equal("GET"), "Stripe %s %s", r.Method, r.Path)
	}
	ghReqs := ghSrv.Requests()
	g.Expect(ghReqs).NotTo(BeEmpty())
	for _, r := range ghReqs {
		g.Expect(r.Method).To(Equal("GET"), "GitHub %s %s", r.Method, r.Path)
	}
	g.Expect(kube.all()).NotTo(BeEmpty())
	for _, r := range kube.all() {
		g.Expect(r).To(HavePrefix("GET "), "API server request %s", r)
	}
	// The provider holds what it held, the cluster too: no new subscription, orders unchanged.
	g.Expect(stripeSrv.Endpoints(tn.apiKey)).To(HaveLen(3))
	var list hookv1.WebhookSubscriptionList
	g.Expect(env.Client.List(ctx, &list, client.InNamespace(tn.ns))).To(Succeed())
	g.Expect(list.Items).To(HaveLen(2))
	after := &hookv1.WebhookSubscription{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(orders), after)).To(Succeed())
	g.Expect(after.Spec.Description).To(Equal("orders pipeline"))
	g.Expect(after.ResourceVersion).To(Equal(liveOrders.ResourceVersion))

	// -o json carries the same plan as data.
	code, stdout, _ = run(t, nil, "plan", "-f", manifests, "-n", tn.ns, "--cluster-name", clusterName, "-o", "json")
	g.Expect(code).To(Equal(cli.ExitPending))
	var results []struct {
		Subscription string `json:"subscription"`
		Plan         struct {
			Decision string `json:"decision"`
			Adopt    bool   `json:"adopt"`
			Steps    []struct {
				Action, Registration, Why, Secret string
				Changes                           []struct{ Field, From, To string }
			} `json:"steps"`
		} `json:"plan"`
	}
	g.Expect(json.Unmarshal([]byte(stdout), &results)).To(Succeed())
	g.Expect(results).To(HaveLen(4))
	g.Expect(results[0].Plan.Steps).To(HaveLen(2))
	g.Expect(results[0].Plan.Steps[0].Action).To(Equal("update"))
	g.Expect(results[0].Plan.Steps[0].Changes[0].Field).To(Equal("events"))
	g.Expect(results[0].Plan.Steps[1].Action).To(Equal("prune"))
	g.Expect(results[0].Plan.Steps[1].Registration).To(Equal(twin.ID))
	g.Expect(results[0].Plan.Steps[1].Why).To(Equal("twin"))
	g.Expect(results[1].Plan.Decision).To(Equal("keep"))
	g.Expect(results[1].Plan.Steps).To(BeEmpty())
	g.Expect(results[2].Plan.Decision).To(Equal("create"))
	g.Expect(results[3].Plan.Adopt).To(BeTrue())
	g.Expect(results[3].Plan.Steps[0].Secret).To(Equal("rotation"))

	// The unchanged GitHub subscription alone, from the cluster by selector: nothing, exit 0.
	code, stdout, stderr = run(t, nil, "plan", "-n", tn.ns, "-l", "app=repo", "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitOK), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).To(ContainSubstring("nothing"))
	g.Expect(stdout).To(ContainSubstring(liveRepo.Status.EndpointID))
}

// TestPlanBadInput: each bad input is one line on stderr and exit 3 (or 1 for a failure),
// with nothing on stdout and no stack trace.
func TestPlanBadInput(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	tn := newTenant(t, g, "badinput")
	dir := t.TempDir()
	notSub := filepath.Join(dir, "configmap.yaml")
	g.Expect(os.WriteFile(notSub, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o644)).To(Succeed())
	notObject := filepath.Join(dir, "values.yaml")
	g.Expect(os.WriteFile(notObject, []byte("replicas: 2\n"), 0o644)).To(Succeed())
	missingCred := tn.stripeSub("nocred", "https://hooks.example.com/nocred", "invoice.paid")
	missingCred.Spec.Provider.CredentialsRef.Name = "absent"
	noCred := filepath.Join(dir, "nocred.yaml")
	writeManifests(t, noCred, missingCred)

	for _, tc := range []struct {
		name string
		args []string
		code int
		line string
	}{
		{"no WebhookSubscription", []string{"plan", "-f", notSub}, cli.ExitUsage, "configmap.yaml holds no WebhookSubscription"},
		{"not a Kubernetes object", []string{"plan", "-f", notObject}, cli.ExitUsage, "document 1: not a Kubernetes object (no apiVersion or kind)"},
		{"a selector matching nothing", []string{"plan", "-n", tn.ns, "-l", "app=none"}, cli.ExitUsage, "no WebhookSubscription in namespace badinput matching app=none"},
		{"a missing file", []string{"plan", "-f", filepath.Join(dir, "absent.yaml")}, cli.ExitUsage, "no such file or directory"},
		{"an unknown output", []string{"plan", "-o", "xml"}, cli.ExitUsage, `--output "xml": want table, yaml or json`},
		{"a missing credential", []string{"plan", "-f", noCred, "-n", tn.ns, "--cluster-name", clusterName}, cli.ExitError, "credentials Secret badinput/absent not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			code, stdout, stderr := run(t, nil, tc.args...)
			g.Expect(code).To(Equal(tc.code), "stdout: %s stderr: %s", stdout, stderr)
			if tc.code == cli.ExitUsage {
				g.Expect(stdout).To(BeEmpty())
				g.Expect(strings.Count(strings.TrimSpace(stderr), "\n")).To(BeZero(), stderr)
				g.Expect(stderr).To(ContainSubstring(tc.line))
			} else {
				g.Expect(stdout + stderr).To(ContainSubstring(tc.line))
			}
			g.Expect(stderr).NotTo(ContainSubstring("goroutine"))
		})
	}
	// An unreachable cluster: one line, exit 1.
	kc := filepath.Join(dir, "kubeconfig")
	g.Expect(os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: x\ncurrent-context: c\n"), 0o600)).To(Succeed())
	code, _, stderr := runWithKubeconfig(t, kc, "plan", "-n", "x")
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(strings.Count(strings.TrimSpace(stderr), "\n")).To(BeZero(), stderr)
	g.Expect(stderr).To(ContainSubstring("127.0.0.1:1"))
}

func writeManifests(t *testing.T, path string, subs ...*hookv1.WebhookSubscription) {
	t.Helper()
	var docs []string
	for _, s := range subs {
		s = s.DeepCopy()
		s.Status = hookv1.WebhookSubscriptionStatus{}
		s.ResourceVersion, s.UID, s.Generation, s.CreationTimestamp, s.ManagedFields, s.Finalizers = "", "", 0, metav1.Time{}, nil, nil
		b, err := yaml.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPlanWaitsOutRateLimits: a provider answering 429 is waited out as the manager would (its
// limiter's wait), said on stderr, and the plan then completes.
func TestPlanWaitsOutRateLimits(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	tn := newTenant(t, g, "ratelimit")
	manifests := filepath.Join(t.TempDir(), "subscriptions.yaml")
	writeManifests(t, manifests, tn.stripeSub("orders", "https://hooks.example.com/orders", "invoice.paid"))
	remove := stripeSrv.Inject(stripefake.Fault{Method: "GET", PathPrefix: "/v1/webhook_endpoints", APIKey: tn.apiKey, Status: 429, Code: "rate_limit", RetryAfter: time.Second, Times: 1})
	defer remove()
	code, stdout, stderr := run(t, nil, "plan", "-f", manifests, "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitPending), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stderr).To(MatchRegexp(`ratelimit/orders: .*rate limit.*; waiting \S+ as the manager would`))
	g.Expect(stdout).To(ContainSubstring("create a registration for https://hooks.example.com/orders"))
	lists := 0
	for _, r := range stripeSrv.Requests() {
		if r.Account == stripefake.AccountLabel(tn.apiKey) && r.Method == "GET" {
			lists++
		}
	}
	g.Expect(lists).To(Equal(2), "the refused list and the one after the wait")
}

// TestPlanReadsImportsOutput: import's output, YAML or JSON, goes straight into plan -f, with
// other kinds beside it (kustomize build output): the Secret import wrote is the signing Secret
// the plan reads, so adopting the Stripe endpoint needs no rotation; other kinds are not
// planned, and said so on stderr.
func TestPlanReadsImportsOutput(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	tn := newTenant(t, g, "import-plan")
	ep := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{URL: "https://hooks.example.com/fits", EnabledEvents: []string{"invoice.paid"}, Secret: "whsec_fits"})
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "whsec.txt")
	g.Expect(os.WriteFile(secretFile, []byte(ep.Secret), 0o600)).To(Succeed())
	for _, output := range []string{"yaml", "json"} {
		code, manifests, stderr := run(t, nil, "import", "--provider", "stripe", "--credentials", "stripe-api", "--api-url", stripeURL, "-n", tn.ns, "--cluster-name", clusterName, "--secret", ep.ID+"="+secretFile, "-o", output)
		g.Expect(code).To(Equal(cli.ExitOK), stderr)
		g.Expect(manifests).To(ContainSubstring("WebhookSubscription"), "-o %s prints manifests", output)
		g.Expect(manifests).NotTo(ContainSubstring("outcome"), "notes go to stderr")
		g.Expect(stderr).To(ContainSubstring("imported " + ep.ID))
		file := filepath.Join(dir, "import."+output)
		extra := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + tn.ns + "\n---\n"
		if output == "json" {
			extra = `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "` + tn.ns + `"}}` + "\n---\n"
		}
		g.Expect(os.WriteFile(file, []byte(extra+manifests), 0o644)).To(Succeed())

		code, stdout, stderr := run(t, nil, "plan", "-f", file, "-n", tn.ns, "--cluster-name", clusterName)
		t.Logf("REPORT import -o %s | plan -f: exit %d\n%s%s", output, code, stdout, stderr)
		g.Expect(code).To(Equal(cli.ExitPending), "stdout: %s stderr: %s", stdout, stderr)
		g.Expect(stderr).To(ContainSubstring("1 documents of other kinds are not planned"))
		g.Expect(stdout).To(MatchRegexp(`import-plan/stripe-\S+\s+stripe\s+keep\s+update\s+` + ep.ID + `\s+update \S+ in place: ownership marker`))
		g.Expect(stdout).NotTo(ContainSubstring("replace"), "the supplied secret is used: no rotation")
	}
}

// TestPlanLearnsTheManagersSettings: plan needs neither --cluster-name nor --receiver-base-url
// repeated: the manager publishes them in status.manager. A healthy cluster whose manager runs
// with its own cluster name and a receiver plans clean (exit 0), a new receiver manifest is
// planned for the manager's receiver URL, and a conflict fails the gate with its own exit code
// (5), not 0.
func TestPlanLearnsTheManagersSettings(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	tn := newTenant(t, g, "plan-settings")
	const base = "https://in.example.com/base"
	viaReceiver := tn.stripeSub("inbox", "", "invoice.paid")
	viaReceiver.Spec.Endpoint = hookv1.EndpointSpec{Receiver: &hookv1.ReceiverEndpoint{}}
	orders := tn.stripeSub("orders", "https://hooks.example.com/settings/orders", "invoice.paid")
	for _, s := range []*hookv1.WebhookSubscription{viaReceiver, orders} {
		g.Expect(env.Client.Create(context.Background(), s.DeepCopy())).To(Succeed())
	}
	stop := startManager(t, func(r *controllers.Reconciler) { r.ClusterName, r.ReceiverBaseURL = "prod-eu", base })
	for _, s := range []*hookv1.WebhookSubscription{viaReceiver, orders} {
		live := expectReady(g, s)
		g.Expect(live.Status.Manager).To(Equal(&hookv1.ManagerSettings{ClusterName: "prod-eu", ReceiverBaseURL: base}))
	}
	stop()

	code, stdout, stderr := run(t, nil, "plan", "-n", tn.ns)
	t.Logf("REPORT plan -n %s without the manager's flags: exit %d\n%s%s", tn.ns, code, stdout, stderr)
	g.Expect(code).To(Equal(cli.ExitOK), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).NotTo(ContainSubstring("conflict"))
	g.Expect(stdout).NotTo(ContainSubstring("error"))

	// A new receiver subscription, and one for a URL another cluster's endpoint serves.
	stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{URL: "https://hooks.example.com/settings/theirs", EnabledEvents: []string{"invoice.paid"},
		Metadata: stripe.MarkerMetadata(providers.Owner{Cluster: "prod-us", Namespace: tn.ns, Name: "theirs", UID: "uid-theirs"}, "")})
	inbox2 := viaReceiver.DeepCopy()
	inbox2.Name, inbox2.Spec.SigningSecret.Name = "inbox-2", "inbox-2-signing"
	theirs := tn.stripeSub("theirs", "https://hooks.example.com/settings/theirs", "invoice.paid")
	file := filepath.Join(t.TempDir(), "new.yaml")
	writeManifests(t, file, inbox2)
	code, stdout, stderr = run(t, nil, "plan", "-f", file, "-n", tn.ns)
	g.Expect(code).To(Equal(cli.ExitPending), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).To(ContainSubstring("create a registration for " + base + "/hooks/" + tn.ns + "/inbox-2"))
	writeManifests(t, file, inbox2, theirs)
	code, stdout, stderr = run(t, nil, "plan", "-f", file, "-n", tn.ns)
	t.Logf("REPORT plan -f with a conflict: exit %d\n%s%s", code, stdout, stderr)
	g.Expect(code).To(Equal(cli.ExitBlocked), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).To(MatchRegexp(`plan-settings/theirs\s+stripe\s+conflict`))
	g.Expect(stderr).To(ContainSubstring("1 of 2 subscriptions cannot go on as they are"))

	// Flags still override, and say so.
	code, _, stderr = run(t, nil, "plan", "-n", tn.ns, "--cluster-name", "guess")
	g.Expect(code).To(Equal(cli.ExitBlocked), stderr)
	g.Expect(stderr).To(ContainSubstring(`the manager publishes "prod-eu"`))
}

// TestPlanGitHubApp: `hookwarden plan` of a subscription to a GitHub App's webhook signs its
// JWTs with the key under privateKey, only reads, and says what a reconcile would do: set the
// empty webhook (create); once a URL is set by hand at the spec's URL, adopt it with a new
// secret and report the events the App's settings differ by.
func TestPlanGitHubApp(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	tn := newTenant(t, g, "planapp")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	const appID = 777001
	hookID := ghSrv.AddApp(appID, "", &key.PublicKey, "push", "issues")
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	g.Expect(env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "github-app"},
		Data: map[string][]byte{"privateKey": pemKey}})).To(Succeed())
	sub := tn.githubSub("app", "https://hooks.example.com/app", "push", "pull_request")
	sub.Spec.Provider.CredentialsRef.Name = "github-app"
	sub.Spec.Provider.GitHub = &hookv1.GitHubTarget{App: &hookv1.GitHubApp{AppID: strconv.Itoa(appID)}}
	manifests := filepath.Join(t.TempDir(), "app.yaml")
	writeManifests(t, manifests, sub)

	ghSrv.ResetRequests()
	code, stdout, stderr := run(t, nil, "plan", "-f", manifests, "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitPending), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).To(ContainSubstring("create"))

	g.Expect(ghSrv.Edit(ghfake.AppTarget(appID), hookID, func(h *ghfake.Hook) { h.Config.URL = "https://hooks.example.com/app" })).To(BeTrue())
	code, stdout, stderr = run(t, nil, "plan", "-f", manifests, "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitPending), "stdout: %s stderr: %s", stdout, stderr)
	g.Expect(stdout).To(ContainSubstring("set-secret"))
	g.Expect(stdout).To(ContainSubstring("not subscribed there: [pull_request]"))
	g.Expect(stdout).To(ContainSubstring("not in spec.events: [issues]"))
	for _, r := range ghSrv.Requests() {
		g.Expect(r.Method).To(Equal("GET"), "GitHub %s %s", r.Method, r.Path)
	}
	g.Expect(ghSrv.AppHook(appID).Config.Secret).To(BeEmpty(), "nothing written")
}
