package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/stripe"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// TestImport: a seeded Stripe account and GitHub repository are imported, the manifests
// applied back, and the manager adopts every registration without a create: the Stripe one
// with the secret the user supplied, the GitHub one by setting a new secret on the same hook.
// One Stripe endpoint carrying another cluster's marker is refused.
func TestImport(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "import")
	orders := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{ID: "we_orders", URL: "https://hooks.example.com/orders", EnabledEvents: []string{"invoice.paid", "checkout.session.completed", "invoice.paid"}, Description: "orders pipeline", Secret: "whsec_import_test_secret"})
	stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{ID: "we_theirs", URL: "https://hooks.example.com/theirs", EnabledEvents: []string{"invoice.paid"},
		Metadata: stripe.MarkerMetadata(providers.Owner{Cluster: "other-cluster", Namespace: "elsewhere", Name: "theirs", UID: "uid-theirs"}, "")})
	hook := ghSrv.Seed(tn.repo, ghfake.Hook{Active: true, Events: []string{"push", "pull_request"}, Config: ghfake.Config{URL: "https://hooks.example.com/repo", ContentType: "form", InsecureSSL: "1", Secret: "old"}})

	dir := t.TempDir()
	secretFile := filepath.Join(dir, "whsec.txt")
	g.Expect(os.WriteFile(secretFile, []byte(orders.Secret+"\n"), 0o600)).To(Succeed())

	code, stripeYAML, stderr := run(t, nil, "import", "--provider", "stripe", "--credentials", "stripe-api", "--api-url", stripeURL, "-n", tn.ns,
		"--cluster-name", clusterName, "--secret", "we_orders="+secretFile)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	golden(t, "import-stripe.yaml", stripeYAML, map[string]string{stripeURL: "<stripe>"})
	g.Expect(stderr).To(ContainSubstring(`refused we_theirs (https://hooks.example.com/theirs): carries the ownership marker of cluster "other-cluster"`))
	g.Expect(stderr).To(ContainSubstring("imported we_orders (https://hooks.example.com/orders) as import/stripe-we-orders: adopted with the signing secret you supplied"))
	g.Expect(stderr).To(ContainSubstring("adopting changes ownership marker:  -> envtest/import/stripe-we-orders"))

	code, ghYAML, stderr := run(t, nil, "import", "--provider", "github", "--credentials", "github-api", "--api-url", ghURL, "--owner", "acme", "--repository", "import", "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stderr).To(ContainSubstring("a new secret is set on the same registration; adopting changes content_type: form -> json, insecure_ssl: 1 -> 0"))
	g.Expect(ghYAML + stripeYAML).NotTo(ContainSubstring("status"))
	g.Expect(ghYAML + stripeYAML).NotTo(ContainSubstring("{}"))
	golden(t, "import-github.yaml", ghYAML, map[string]string{ghURL: "<github>"})

	// Applied back: every registration adopted, none created.
	stripeSrv.ResetRequests()
	ghSrv.ResetRequests()
	for _, doc := range append(strings.Split(stripeYAML, "---\n"), strings.Split(ghYAML, "---\n")...) {
		apply(t, g, doc)
	}
	stop := startManager(t)
	defer stop()
	for _, name := range []string{"stripe-we-orders", "github-" + strconv.FormatInt(hook.ID, 10)} {
		sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name}}
		live := expectReady(g, sub)
		g.Expect(live.Status.EndpointID).NotTo(BeEmpty())
	}
	g.Expect(stripeCreates()).To(BeZero(), "Stripe creates")
	for _, r := range ghSrv.Requests() {
		g.Expect(r.Op).NotTo(Equal(ghfake.OpCreate), "GitHub create %s", r.Path)
	}
	g.Expect(stripeSrv.Endpoints(tn.apiKey)).To(HaveLen(2))
	g.Expect(ghSrv.Hooks(tn.repo)).To(HaveLen(1))
	g.Expect(ghSrv.Hooks(tn.repo)[0].Config.Secret).NotTo(Equal("old"))
	// The supplied secret is kept, and the signing Secret is now the subscription's.
	sec := &corev1.Secret{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "stripe-we-orders-signing"}, sec)).To(Succeed())
		g.Expect(metav1.GetControllerOf(sec)).NotTo(BeNil())
	}).Should(Succeed())
	g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(orders.Secret))
}

// stripeCreates counts Stripe creates (POST to the collection).
func stripeCreates() int {
	n := 0
	for _, r := range stripeSrv.Requests() {
		if r.Method == "POST" && r.Path == "/v1/webhook_endpoints" {
			n++
		}
	}
	return n
}

// apply creates one manifest as kubectl apply would for a new object.
func apply(t *testing.T, g *WithT, doc string) {
	t.Helper()
	if strings.TrimSpace(doc) == "" {
		return
	}
	u := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
	g.Expect(env.Client.Create(context.Background(), u)).To(Succeed())
}

// TestImportSkipsWhatThisClusterOwns: import never hands out a registration a subscription of
// this cluster already answers for. A GitHub hook shop/repo records (GitHub stores no marker)
// and an unmarked Stripe twin of shop/orders' endpoint are skipped, naming the subscription;
// only the foreign hook is imported. Applied, nothing the cluster owned is changed: no new
// secret on shop/repo's hook (which would break its deliveries' verification), no Stripe
// create.
func TestImportSkipsWhatThisClusterOwns(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "import-owned")
	repo := tn.githubSub("repo", "https://hooks.example.com/owned/repo", "push")
	orders := tn.stripeSub("orders", "https://hooks.example.com/owned/orders", "invoice.paid")
	for _, s := range []*hookv1.WebhookSubscription{repo, orders} {
		g.Expect(env.Client.Create(ctx, s.DeepCopy())).To(Succeed())
	}
	stop := startManager(t)
	repoLive, ordersLive := expectReady(g, repo), expectReady(g, orders)
	stop()
	owned := repoLive.Status.EndpointID
	ownedSecret := ghHookSecret(tn, owned)
	twin := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{URL: "https://hooks.example.com/owned/orders", EnabledEvents: []string{"invoice.paid"}, Description: "by hand"})
	foreign := ghSrv.Seed(tn.repo, ghfake.Hook{Active: true, Events: []string{"push"}, Config: ghfake.Config{URL: "https://hooks.example.com/owned/other", ContentType: "json", Secret: "theirs"}})

	code, ghYAML, ghErr := run(t, nil, "import", "--provider", "github", "--credentials", "github-api", "--api-url", ghURL, "--owner", "acme", "--repository", tn.ns, "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitOK), ghErr)
	code, stripeYAML, stripeErr := run(t, nil, "import", "--provider", "stripe", "--credentials", "stripe-api", "--api-url", stripeURL, "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitOK), stripeErr)
	t.Logf("REPORT import github stderr:\n%s", ghErr)
	t.Logf("REPORT import stripe stderr:\n%s", stripeErr)

	imported, stop := applyImported(t, g, ghYAML, stripeYAML)
	defer stop()
	expectSettled(g, repo)
	expectSettled(g, orders)
	ownedUpdates := 0
	for _, r := range ghSrv.Requests() {
		if r.Op == ghfake.OpUpdate && strings.HasSuffix(r.Path, "/hooks/"+owned) {
			ownedUpdates++
		}
	}
	t.Logf("REPORT applied %d imported subscriptions: GitHub updates of %s's hook %d, Stripe creates %d, Stripe deletes %d",
		len(imported), key(repo), ownedUpdates, stripeCreates(), stripeSrv.CountRequests("DELETE", "/v1/webhook_endpoints/"))

	g.Expect(ghErr).To(ContainSubstring(fmt.Sprintf("skipped %s (https://hooks.example.com/owned/repo): already owned by %s in this cluster (its status records it)", owned, key(repo))))
	g.Expect(stripeErr).To(ContainSubstring(fmt.Sprintf("skipped %s (https://hooks.example.com/owned/orders): already owned by %s in this cluster (its ownership marker)", ordersLive.Status.EndpointID, key(orders))))
	g.Expect(stripeErr).To(ContainSubstring(fmt.Sprintf("skipped %s (https://hooks.example.com/owned/orders): a twin of the registration of %s", twin.ID, key(orders))))
	g.Expect(ghYAML).NotTo(ContainSubstring(owned))
	g.Expect(ghYAML).To(ContainSubstring(strconv.FormatInt(foreign.ID, 10)))
	g.Expect(stripeYAML).To(BeEmpty())
	g.Expect(imported).To(HaveLen(1))
	g.Expect(ownedUpdates).To(BeZero(), "a new secret on %s's hook", key(repo))
	g.Expect(ghHookSecret(tn, owned)).To(Equal(ownedSecret))
	g.Expect(stripeCreates()).To(BeZero())
	expectReady(g, repo)
	expectReady(g, orders)
}

// ghHookSecret is the secret GitHub signs the tenant's hook id with.
func ghHookSecret(tn *tenant, id string) string {
	for _, h := range ghSrv.Hooks(tn.repo) {
		if strconv.FormatInt(h.ID, 10) == id {
			return h.Config.Secret
		}
	}
	return ""
}

// expectSettled waits until the manager has decided about sub's generation: Ready, or not for
// a reason other than work in progress (a stall, a conflict).
func expectSettled(g *WithT, sub *hookv1.WebhookSubscription) {
	g.Eventually(func(g Gomega) {
		live := &hookv1.WebhookSubscription{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(sub), live)).To(Succeed())
		g.Expect(live.Status.ObservedGeneration).To(Equal(live.Generation))
		ready := meta.FindStatusCondition(live.Status.Conditions, hookv1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status == metav1.ConditionTrue || ready.Reason != hookv1.ReasonProgressing).To(BeTrue(), "%v", live.Status.Conditions)
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func key(s *hookv1.WebhookSubscription) string { return s.Namespace + "/" + s.Name }

// TestImportGroupsTwins: registrations for one canonical URL are one manifest, the twins
// reported. On Stripe the one whose secret the user supplied is kept with it and the twin
// pruned: no create (two manifests used to make two subscriptions for one URL, one of them
// rotating to a new endpoint). On GitHub the hook whose secret was supplied is adopted without
// a new secret, its twin left alone and reported.
func TestImportGroupsTwins(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	tn := newTenant(t, g, "import-twins")
	older := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{URL: "https://Hooks.Example.com:443/twins", EnabledEvents: []string{"invoice.paid"}, Description: "first try"})
	newer := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{URL: "https://hooks.example.com/twins", EnabledEvents: []string{"invoice.paid"}, Description: "second try", Secret: "whsec_twins_newer"})
	hookA := ghSrv.Seed(tn.repo, ghfake.Hook{Active: true, Events: []string{"push"}, Config: ghfake.Config{URL: "https://hooks.example.com/gh-twins", ContentType: "json", Secret: "secret-a"}})
	hookB := ghSrv.Seed(tn.repo, ghfake.Hook{Active: true, Events: []string{"push"}, Config: ghfake.Config{URL: "https://hooks.example.com/gh-twins", ContentType: "json", Secret: "secret-b"}})
	dir := t.TempDir()
	stripeSecret, ghSecret := filepath.Join(dir, "stripe.txt"), filepath.Join(dir, "gh.txt")
	g.Expect(os.WriteFile(stripeSecret, []byte(newer.Secret), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(ghSecret, []byte(hookB.Config.Secret), 0o600)).To(Succeed())
	idA, idB := strconv.FormatInt(hookA.ID, 10), strconv.FormatInt(hookB.ID, 10)

	code, stripeYAML, stripeErr := run(t, nil, "import", "--provider", "stripe", "--credentials", "stripe-api", "--api-url", stripeURL, "-n", tn.ns, "--cluster-name", clusterName, "--secret", newer.ID+"="+stripeSecret)
	g.Expect(code).To(Equal(cli.ExitOK), stripeErr)
	code, ghYAML, ghErr := run(t, nil, "import", "--provider", "github", "--credentials", "github-api", "--api-url", ghURL, "--owner", "acme", "--repository", tn.ns, "-n", tn.ns, "--cluster-name", clusterName, "--secret", idB+"="+ghSecret)
	g.Expect(code).To(Equal(cli.ExitOK), ghErr)
	t.Logf("REPORT import stripe stderr:\n%s", stripeErr)
	t.Logf("REPORT import github stderr:\n%s", ghErr)

	imported, stop := applyImported(t, g, stripeYAML, ghYAML)
	defer stop()
	g.Eventually(func() int { return len(stripeSrv.Endpoints(tn.apiKey)) }).Should(Equal(1), "the Stripe twin pruned")
	ghUpdates := 0
	for _, r := range ghSrv.Requests() {
		if r.Op == ghfake.OpUpdate || r.Op == ghfake.OpCreate {
			ghUpdates++
		}
	}
	t.Logf("REPORT applied %d subscriptions: Stripe creates %d, deletes %d; GitHub creates and updates %d", len(imported),
		stripeCreates(), stripeSrv.CountRequests("DELETE", "/v1/webhook_endpoints/"), ghUpdates)

	g.Expect(imported).To(HaveLen(2), "one subscription per URL")
	g.Expect(stripeErr).To(ContainSubstring(fmt.Sprintf("twin %s (%s): a twin of %s (the same canonical URL), not imported", older.ID, older.URL, newer.ID)))
	g.Expect(ghErr).To(ContainSubstring(fmt.Sprintf("twin %s (%s): a twin of %s (the same canonical URL), not imported", idA, hookA.Config.URL, idB)))
	g.Expect(stripeCreates()).To(BeZero())
	g.Expect(stripeSrv.Endpoints(tn.apiKey)[0].ID).To(Equal(newer.ID), "the endpoint whose secret was supplied is kept")
	g.Expect(ghUpdates).To(BeZero(), "no new secret, no new hook")
	for _, s := range imported {
		live := expectReady(g, s)
		g.Expect(live.Status.EndpointID).To(BeElementOf(newer.ID, idB))
	}
	g.Expect(ghSrv.Hooks(tn.repo)).To(HaveLen(2), "the GitHub twin cannot be proven ours: left alone")
}

// applyImported applies import's output as a user would (the providers' request logs reset
// first) and runs the manager until each subscription in it has settled; stop the manager when
// done.
func applyImported(t *testing.T, g *WithT, outputs ...string) (imported []*hookv1.WebhookSubscription, stop func()) {
	stripeSrv.ResetRequests()
	ghSrv.ResetRequests()
	for _, out := range outputs {
		for _, doc := range strings.Split(out, "---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			apply(t, g, doc)
			u := &hookv1.WebhookSubscription{}
			g.Expect(yaml.Unmarshal([]byte(doc), u)).To(Succeed())
			if u.Kind == "WebhookSubscription" {
				imported = append(imported, u)
			}
		}
	}
	stop = startManager(t)
	for _, s := range imported {
		expectSettled(g, s)
	}
	return imported, stop
}

// TestImportedSubscriptionWaitsForItsSecret: import writes the signing Secret before the
// subscription, and a subscription applied before its Secret anyway (another order, a slow
// apply) waits for it instead of rotating: no Stripe create, the supplied secret kept.
func TestImportedSubscriptionWaitsForItsSecret(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "import-late-secret")
	ep := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{URL: "https://hooks.example.com/late", EnabledEvents: []string{"invoice.paid"}, Secret: "whsec_late_secret"})
	file := filepath.Join(t.TempDir(), "whsec.txt")
	g.Expect(os.WriteFile(file, []byte(ep.Secret), 0o600)).To(Succeed())
	code, out, stderr := run(t, nil, "import", "--provider", "stripe", "--credentials", "stripe-api", "--api-url", stripeURL, "-n", tn.ns, "--cluster-name", clusterName, "--secret", ep.ID+"="+file)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	docs := strings.Split(out, "---\n")
	g.Expect(docs).To(HaveLen(2))
	secretDoc, subDoc := docs[0], docs[1]
	if strings.Contains(secretDoc, "kind: WebhookSubscription") {
		secretDoc, subDoc = subDoc, secretDoc
	}

	// The subscription first, the Secret once the manager has looked at the subscription.
	stripeSrv.ResetRequests()
	stop := startManager(t)
	defer stop()
	apply(t, g, subDoc)
	sub := &hookv1.WebhookSubscription{}
	g.Expect(yaml.Unmarshal([]byte(subDoc), sub)).To(Succeed())
	g.Eventually(func(g Gomega) {
		live := &hookv1.WebhookSubscription{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), live)).To(Succeed())
		g.Expect(meta.FindStatusCondition(live.Status.Conditions, hookv1.ConditionReady)).NotTo(BeNil(), "the manager has looked at it")
	}).WithTimeout(30 * time.Second).Should(Succeed()) // a manager starting on a busy machine
	t.Logf("REPORT before the Secret is applied: Stripe creates %d", stripeCreates())
	apply(t, g, secretDoc)
	live := expectReady(g, sub)
	t.Logf("REPORT subscription applied before its Secret: Stripe creates %d, deletes %d", stripeCreates(), stripeSrv.CountRequests("DELETE", "/v1/webhook_endpoints/"))
	g.Expect(docs[0]).To(ContainSubstring("kind: Secret"), "import writes the Secret first")
	g.Expect(stripeCreates()).To(BeZero())
	g.Expect(live.Status.EndpointID).To(Equal(ep.ID))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: sub.Spec.SigningSecret.Name}, sec)).To(Succeed())
	g.Expect(string(sec.Data[hookv1.SecretKeyCurrent])).To(Equal(ep.Secret))
}
