package controllers_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
)

// pingChecker plays the receiver for a fake GitHub: each delivery is verified, at the moment it
// arrives, against the route Secret the API server holds then (never a cache), and the answer
// recorded in order.
type pingChecker struct {
	ns string // the receiver's namespace
	mu sync.Mutex
	// answers per hook id, in arrival order.
	answers map[string][]int
}

func (c *pingChecker) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	// The hook URL is https://hooks.example.com/hooks/<namespace>/<name>.
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	code := http.StatusNotFound
	if len(parts) == 3 && parts[0] == "hooks" {
		sec := &corev1.Secret{}
		err := k8s.Get(r.Context(), types.NamespacedName{Namespace: c.ns, Name: routesecret.Name(parts[1], parts[2])}, sec)
		code = http.StatusUnauthorized
		if err == nil {
			var secrets [][]byte
			for _, v := range routesecret.Data(sec.Data) {
				secrets = append(secrets, v)
			}
			if _, verr := github.NewVerifier().Verify(providers.Delivery{Header: r.Header, Body: body, Now: time.Now()}, secrets); verr == nil {
				code = http.StatusOK
			}
		}
	}
	c.mu.Lock()
	id := r.Header.Get(github.HookIDHeader)
	c.answers[id] = append(c.answers[id], code)
	c.mu.Unlock()
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader("{}")), Header: http.Header{}, Request: r}, nil
}

func (c *pingChecker) answersFor(id string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.answers[id]...)
}

func routeSecretOf(g Gomega, ns string, s *hookv1.WebhookSubscription) *corev1.Secret {
	sec := &corev1.Secret{}
	g.Expect(k8s.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: routesecret.Name(s.Namespace, s.Name)}, sec)).To(Succeed())
	return sec
}

func routeSecretGone(g Gomega, ns string, s *hookv1.WebhookSubscription) {
	err := k8s.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: routesecret.Name(s.Namespace, s.Name)}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "route Secret still there: %v", err)
}

var _ = Describe("Route Secrets for the receiver", Ordered, ContinueOnFailure, func() {
	const receiverNS = "hookwarden-routes"
	var mgr *runningManager
	BeforeAll(func() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: receiverNS}}))).To(Succeed())
		mgr = startManager(managerOptions{receiverNamespace: receiverNS, routeSweep: time.Second})
	})
	AfterAll(func() {
		if mgr != nil {
			mgr.Stop()
		}
	})

	It("copies every signing-Secret write into the receiver's namespace, naming the source, and deletes the copy with the subscription (Delete and Orphan)", func() {
		t := newTenant()
		del, orphan := t.sub("orders", "https://hooks.example.com/hooks/r/orders"), t.sub("refunds", "https://hooks.example.com/hooks/r/refunds")
		orphan.Spec.Policies.Deletion = hookv1.DeletionOrphan
		for _, s := range []*hookv1.WebhookSubscription{del, orphan} {
			Expect(k8s.Create(suiteCtx, s)).To(Succeed())
			got := expectReady(s)
			Eventually(func(g Gomega) {
				signing, copied := signingSecret(g, s), routeSecretOf(g, receiverNS, s)
				g.Expect(copied.Data).To(Equal(routesecret.Data(signing.Data)))
				g.Expect(copied.Data).To(HaveKey(hookv1.SecretKeyFor(got.Status.EndpointID)))
				g.Expect(copied.Labels).To(HaveKeyWithValue(routesecret.Label, "true"))
				g.Expect(copied.Labels).To(HaveKeyWithValue(routesecret.LabelNamespace, s.Namespace))
				g.Expect(copied.Labels).To(HaveKeyWithValue(routesecret.LabelName, s.Name))
				g.Expect(copied.Labels).NotTo(HaveKey(hookv1.LabelSigningSecret), "the receiver's copy is not a signing Secret")
				g.Expect(copied.Annotations).To(HaveKeyWithValue(routesecret.AnnotationSubscription, s.Namespace+"/"+s.Name))
				g.Expect(copied.Annotations).To(HaveKeyWithValue(routesecret.AnnotationUID, string(got.UID)))
				g.Expect(copied.OwnerReferences).To(BeEmpty(), "owner references cannot cross namespaces")
			}).Should(Succeed())
		}
		for _, s := range []*hookv1.WebhookSubscription{del, orphan} {
			Expect(k8s.Delete(suiteCtx, s)).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(apierrors.IsNotFound(k8s.Get(suiteCtx, client.ObjectKeyFromObject(s), &hookv1.WebhookSubscription{}))).To(BeTrue())
				routeSecretGone(g, receiverNS, s)
			}).Should(Succeed(), "policy %s", s.Spec.Policies.Deletion)
		}
	})

	It("has GitHub's first ping verified: the pending secret is in the copy before the create is sent", func() {
		checker := &pingChecker{ns: receiverNS, answers: map[string][]int{}}
		srv := ghfake.New(ghfake.WithDeliveries(&http.Client{Transport: checker, Timeout: 5 * time.Second}))
		url, stop := srv.Start()
		DeferCleanup(stop)
		ns := fmt.Sprintf("routes-gh-%d", time.Now().UnixNano()%100000)
		token := fmt.Sprintf("ghp_routes_%d", time.Now().UnixNano())
		srv.Grant(token, "orgs/acme-routes", "repos/acme-routes/shop")
		Expect(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "github-api"}, StringData: map[string]string{"token": token}})).To(Succeed())
		for _, target := range []*hookv1.GitHubTarget{{Organization: "acme-routes"}, {Owner: "acme-routes", Repository: "shop"}} {
			name := "org"
			if target.Repository != "" {
				name = "repo"
			}
			s := &hookv1.WebhookSubscription{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: hookv1.WebhookSubscriptionSpec{
					Provider: hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, CredentialsRef: hookv1.SecretKeySelector{Name: "github-api"}, APIURL: url, GitHub: target},
					Endpoint: hookv1.EndpointSpec{URL: "https://hooks.example.com/hooks/" + ns + "/" + name},
					Events:   []string{"push"}, SigningSecret: hookv1.SigningSecretSpec{Name: name + "-signing"},
				},
			}
			Expect(k8s.Create(suiteCtx, s)).To(Succeed())
			got := expectReady(s)
			srv.WaitDeliveries()
			Eventually(func(g Gomega) {
				answers := checker.answersFor(got.Status.EndpointID)
				g.Expect(answers).NotTo(BeEmpty(), "no ping yet")
				g.Expect(answers[0]).To(Equal(http.StatusOK), "the first ping (answers %v)", answers)
			}).Should(Succeed())
		}
	})

	It("sweeps copies whose subscription is gone, restores a copy deleted by hand, and leaves other Secrets alone", func() {
		t := newTenant()
		s := t.sub("invoices", "https://hooks.example.com/hooks/r/invoices")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		Eventually(func(g Gomega) { routeSecretOf(g, receiverNS, s) }).Should(Succeed())

		// Left behind by a subscription whose finalizer was removed by hand, and one for a
		// subscription of the same name that no longer exists (another UID).
		ghost := routesecret.New(receiverNS, routesecret.Source{Namespace: t.ns, Name: "ghost", UID: "uid-gone"}, map[string][]byte{hookv1.SecretKeyCurrent: []byte("x")})
		Expect(k8s.Create(suiteCtx, ghost)).To(Succeed())
		other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: receiverNS, Name: "receiver-db"}, StringData: map[string]string{"dsn": "postgres://db"}}
		Expect(client.IgnoreAlreadyExists(k8s.Create(suiteCtx, other))).To(Succeed())
		Expect(k8s.Delete(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: receiverNS, Name: routesecret.Name(s.Namespace, s.Name)}})).To(Succeed())

		Eventually(func(g Gomega) {
			err := k8s.Get(suiteCtx, client.ObjectKeyFromObject(ghost), &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the orphan is still there: %v", err)
			copied := routeSecretOf(g, receiverNS, s)
			g.Expect(copied.Data).To(Equal(routesecret.Data(signingSecret(g, s).Data)))
		}).Should(Succeed())
		Consistently(func() error {
			return k8s.Get(suiteCtx, client.ObjectKeyFromObject(other), &corev1.Secret{})
		}).WithTimeout(3*time.Second).Should(Succeed(), "a Secret that is not a route Secret is never deleted")
	})

	It("copies existing signing Secrets when the manager first runs with a receiver namespace (an upgrade)", func() {
		mgr.Stop()
		mgr = startManager(managerOptions{})
		t := newTenant()
		s := t.sub("payouts", "https://hooks.example.com/hooks/r/payouts")
		Expect(k8s.Create(suiteCtx, s)).To(Succeed())
		expectReady(s)
		Consistently(func(g Gomega) { routeSecretGone(g, receiverNS, s) }).WithTimeout(2 * time.Second).Should(Succeed())
		mgr.Stop()
		mgr = startManager(managerOptions{receiverNamespace: receiverNS, routeSweep: time.Hour})
		Eventually(func(g Gomega) {
			g.Expect(routeSecretOf(g, receiverNS, s).Data).To(Equal(routesecret.Data(signingSecret(g, s).Data)))
		}).Should(Succeed())
	})
})
