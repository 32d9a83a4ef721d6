package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/cli"
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
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "import")
	orders := stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{ID: "we_orders", URL: "https://hooks.example.com/orders", EnabledEvents: []string{"invoice.paid", "checkout.session.completed", "invoice.paid"}, Description: "orders pipeline", Secret: "whsec_import_test_secret"})
	stripeSrv.Seed(tn.apiKey, stripefake.Endpoint{ID: "we_theirs", URL: "https://hooks.example.com/theirs", EnabledEvents: []string{"invoice.paid"},
		Metadata: stripe.MarkerMetadata(providers.Owner{Cluster: "other-cluster", Namespace: "elsewhere", Name: "theirs", UID: "uid-theirs"}, "")})
	hook := ghSrv.Seed(tn.repo, ghfake.Hook{Active: true, Events: []string{"push", "pull_request"}, Config: ghfake.Config{URL: "https://hooks.example.com/repo", Secret: "old"}})

	dir := t.TempDir()
	secretFile := filepath.Join(dir, "whsec.txt")
	g.Expect(os.WriteFile(secretFile, []byte(orders.Secret+"\n"), 0o600)).To(Succeed())

	code, stripeYAML, stderr := run(t, nil, "import", "--provider", "stripe", "--credentials", "stripe-api", "--api-url", stripeURL, "-n", tn.ns,
		"--cluster-name", clusterName, "--secret", "we_orders="+secretFile)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	golden(t, "import-stripe.yaml", stripeYAML, map[string]string{stripeURL: "<stripe>"})
	g.Expect(stderr).To(ContainSubstring(`refused we_theirs (https://hooks.example.com/theirs): carries the ownership marker of cluster "other-cluster"`))
	g.Expect(stderr).To(ContainSubstring("imported we_orders (https://hooks.example.com/orders) as import/stripe-we-orders: adopted with the signing secret you supplied"))

	code, ghYAML, stderr := run(t, nil, "import", "--provider", "github", "--credentials", "github-api", "--api-url", ghURL, "--owner", "acme", "--repository", "import", "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stderr).To(ContainSubstring("a new secret is set on the same registration"))
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
