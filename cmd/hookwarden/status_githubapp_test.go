package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
)

// TestImportAndStatusGitHubApp: `hookwarden import --app` of a GitHub App whose webhook URL was
// set by hand in its settings (a secret we do not know), read with a JWT signed with the key
// under privateKey and only reads; applied, the manager adopts the webhook with one PATCH (a new
// secret, the URL kept), and `status` shows it as the App's webhook with Delivering from the
// App's /app/hook/deliveries. (This file sorts after import_test.go: the App's webhook takes a
// hook id from the shared fake, which TestImport's golden names.)
func TestImportAndStatusGitHubApp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "importapp")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	const appID = 777002
	hookID := ghSrv.AddApp(appID, "", &key.PublicKey, "push", "issues")
	// Loopback, where nothing listens: a delivery fails without leaving the machine.
	const hookURL = "https://127.0.0.1:1/app"
	g.Expect(ghSrv.Edit(ghfake.AppTarget(appID), hookID, func(h *ghfake.Hook) { h.Config.URL, h.Config.Secret = hookURL, "set-by-hand" })).To(BeTrue())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "app-key"},
		Data: map[string][]byte{"privateKey": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})}})).To(Succeed())
	failed, err := ghSrv.Emit(ghfake.AppTarget(appID), "push", []byte(`{"ref":"refs/heads/main","installation":{"id":42}}`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(failed).To(HaveLen(1))
	g.Expect(failed[0].Code).To(BeZero(), "no answer")

	ghSrv.ResetRequests()
	code, manifests, stderr := run(t, nil, "import", "--provider", "github", "--app", strconv.Itoa(appID), "--credentials", "app-key",
		"--api-url", ghURL, "-n", tn.ns, "--cluster-name", clusterName)
	t.Logf("REPORT import --app:\n%s", stderr)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stderr).To(ContainSubstring("imported app (" + hookURL + ") as importapp/github-app: the provider masks its secret: a new secret is set on the same registration"))
	g.Expect(strings.Count(manifests, "kind: WebhookSubscription")).To(Equal(1), manifests)
	g.Expect(manifests).To(ContainSubstring("app:\n        appID: \"777002\""))
	g.Expect(manifests).To(ContainSubstring("events:\n  - issues\n  - push"), "the App's events, as a set")
	reqs := ghSrv.Requests()
	g.Expect(reqs).NotTo(BeEmpty())
	for _, r := range reqs {
		g.Expect(r.Method).To(Equal("GET"), "GitHub %s %s", r.Method, r.Path)
		g.Expect(r.Target).To(Equal(ghfake.AppTarget(appID)), "read as the App, with its JWT")
	}

	for _, doc := range strings.Split(manifests, "---\n") {
		apply(t, g, doc)
	}
	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "github-app"}}
	stop := startManager(t)
	live := expectReady(g, sub)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), live)).To(Succeed())
		d := meta.FindStatusCondition(live.Status.Conditions, hookv1.ConditionDelivering)
		g.Expect(d).NotTo(BeNil())
		g.Expect(d.Reason).To(Equal(hookv1.ReasonFailing), d.Message)
	}).Should(Succeed())
	stop()
	h := ghSrv.AppHook(appID)
	g.Expect(h.Config.URL).To(Equal(hookURL), "adopted in place")
	g.Expect(h.Config.Secret).NotTo(BeElementOf("", "set-by-hand"), "a secret of ours")
	patches := 0
	for _, r := range ghSrv.Requests() {
		g.Expect(r.Op).NotTo(Equal(ghfake.OpCreate))
		if r.Op == ghfake.OpAppConfigUpdate {
			patches++
		}
	}
	g.Expect(patches).To(Equal(1), "one PATCH of /app/hook/config")

	code, stdout, stderr := run(t, nil, "status", "-n", tn.ns)
	t.Logf("REPORT status of a GitHub App subscription:\n%s", stdout)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(ContainSubstring("importapp/github-app  github app  Ready=True"))
	g.Expect(stdout).To(ContainSubstring("registration app  " + hookURL))
	g.Expect(stdout).To(MatchRegexp(`Delivering=False  Failing  .*1 of 1 recent deliveries failed; last got no answer`))
}
