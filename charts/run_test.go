package charts_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/childproc"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

type proc struct {
	cmd *exec.Cmd
	log string
}

// start runs one of the binaries `make build` made; its output goes to a file shown on failure.
func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logPath}
	t.Cleanup(func() {
		p.stop()
		_ = f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s output:\n%s", name, b)
		}
	})
	return p
}

func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// eventually retries f until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if err = f(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

func httpGet(rawURL, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The metrics certificate is self-signed (as in kubebuilder v4 without cert-manager).
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	res, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

func wantStatus(rawURL, token string, want int) func() error {
	return func() error {
		code, body, err := httpGet(rawURL, token)
		if err != nil {
			return err
		}
		if code != want {
			return fmt.Errorf("GET %s: %d, want %d: %.300s", rawURL, code, want, body)
		}
		return nil
	}
}

func randHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func subscriptionYAML(ns, name, apiURL string) []byte {
	return subscriptionWithSink(ns, name, apiURL, "http://127.0.0.1:9/events")
}

// subscriptionWithSink is a Stripe subscription whose events the receiver delivers to sink.
func subscriptionWithSink(ns, name, apiURL, sink string) []byte {
	return fmt.Appendf(nil, `apiVersion: hookwarden.io/v1alpha1
kind: WebhookSubscription
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  provider:
    type: stripe
    credentialsRef: {name: stripe-api, key: apiKey}
    apiURL: %[3]s
  endpoint: {url: "https://hooks.example.com/hooks/%[1]s/%[2]s"}
  events: [invoice.paid]
  signingSecret: {name: %[2]s-signing}
  delivery:
    sink: {url: "%[4]s"}
`, ns, name, apiURL, sink)
}

func credentials(t *testing.T, ns, apiKey string) {
	t.Helper()
	_, err := kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stripe-api"}, StringData: map[string]string{"apiKey": apiKey}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func jsonpath(t *testing.T, ns, name, path string) string {
	t.Helper()
	out, _ := runCmd(t, nil, kubectlBin, "--kubeconfig", kubeconfig, "-n", ns, "get", "whsub", name, "-o", "jsonpath="+path)
	return strings.TrimSpace(out)
}

func waitReady(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 90*time.Second, "subscription "+ns+"/"+name+" Ready", func() error {
		if got := jsonpath(t, ns, name, `{.status.conditions[?(@.type=="Ready")].status}`); got != "True" {
			return fmt.Errorf("Ready=%q (%s)", got, jsonpath(t, ns, name, `{.status.conditions[?(@.type=="Ready")].message}`))
		}
		return nil
	})
}

// scrapedNames returns the metric names in a Prometheus text exposition.
func scrapedNames(body string) map[string]bool {
	names := map[string]bool{}
	for n := range scrapedLabels(body) {
		names[n] = true
	}
	return names
}

var exposedLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)

// scrapedLabels returns the label names of each metric in a Prometheus text exposition.
func scrapedLabels(body string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.IndexAny(l, "{ ")
		if i <= 0 {
			continue
		}
		name := l[:i]
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		if l[i] == '{' {
			for _, m := range exposedLabel.FindAllStringSubmatch(l[i:], -1) {
				out[name][m[1]] = true
			}
		}
	}
	return out
}

// Both binaries run as their chart ServiceAccounts (tokens from the TokenRequest API): the
// manager registers a subscription under the kube-system UID as cluster name, both serve
// authenticated metrics, readiness means ready, and the metrics the alerts and the dashboard
// name are the ones they serve.
func TestBinariesAsServiceAccounts(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	install(t)
	ctx := context.Background()
	ks, err := kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stripe := fake.New()
	apiURL, stopStripe := stripe.Start()
	defer stopStripe()
	apiKey := "sk_test_charts_" + randHex()
	credentials(t, "shop", apiKey)
	kubectl(t, subscriptionYAML("shop", "orders", apiURL), "apply", "-f", "-")

	// A scraper allowed to GET /metrics, as Prometheus would be.
	if _, err := kube.CoreV1().ServiceAccounts("hw-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "hw-hookwarden-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: "hw-system"}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	scraper := saToken(t, "hw-system", "scraper")

	mgrKC, _ := saKubeconfig(t, "hw-system", "hw-hookwarden-manager")
	mMetrics, mProbe := freeAddr(t), freeAddr(t)
	mgr := start(t, "manager", nil, "--kubeconfig", mgrKC, "--leader-elect=true", "--leader-election-namespace=hw-system", "--receiver-namespace=hw-system",
		"--metrics-bind-address="+mMetrics, "--metrics-secure", "--health-probe-bind-address="+mProbe)
	eventually(t, 60*time.Second, "manager /readyz", wantStatus("http://"+mProbe+"/readyz", "", http.StatusOK))
	waitReady(t, "shop", "orders")
	eps := stripe.Endpoints(apiKey)
	if len(eps) != 1 || eps[0].Metadata["hookwarden_cluster"] != string(ks.UID) {
		t.Fatalf("endpoints at the provider %+v, want one whose marker names cluster %s (the kube-system UID)", eps, ks.UID)
	}
	t.Logf("REPORT cluster name by default: hookwarden_cluster=%s = kube-system UID", eps[0].Metadata["hookwarden_cluster"])

	recvToken := saToken(t, "hw-system", "hw-hookwarden-receiver")
	mURL := "https://" + mMetrics + "/metrics"
	for _, c := range []struct {
		who, token string
		want       int
	}{{"no token", "", http.StatusUnauthorized}, {"a token without metrics-reader", recvToken, http.StatusForbidden}, {"the scraper", scraper, http.StatusOK}} {
		eventually(t, 20*time.Second, "manager metrics for "+c.who, wantStatus(mURL, c.token, c.want))
	}
	_, managerMetrics, err := httpGet(mURL, scraper)
	if err != nil {
		t.Fatal(err)
	}

	// The manager (as its ServiceAccount, through the admission policy) keeps the receiver's
	// copy of the signing material in the release namespace.
	routeKey := routesecret.Name("shop", "orders")
	var route *corev1.Secret
	eventually(t, 30*time.Second, "the route Secret of shop/orders in hw-system", func() error {
		var err error
		route, err = kube.CoreV1().Secrets("hw-system").Get(ctx, routeKey, metav1.GetOptions{})
		if err == nil && len(route.Data[hookv1.SecretKeyCurrent]) == 0 {
			err = fmt.Errorf("no current secret yet in %v", slices.Collect(maps.Keys(route.Data)))
		}
		return err
	})

	// The receiver on PostgreSQL (the several-replica store), its DSN from the environment as
	// the chart passes it, its cluster from --kubeconfig as the manager's.
	dsn := storetest.PostgresDSN(t)
	recvKC, _ := saKubeconfig(t, "hw-system", "hw-hookwarden-receiver")
	rBind, rMetrics, rProbe := freeAddr(t), freeAddr(t), freeAddr(t)
	start(t, "receiver", []string{"HOOKWARDEN_STORE=" + dsn}, "--kubeconfig", recvKC, "--receiver-namespace=hw-system", "--bind-address="+rBind,
		"--metrics-bind-address="+rMetrics, "--metrics-secure", "--health-probe-bind-address="+rProbe)
	eventually(t, 60*time.Second, "receiver /readyz", wantStatus("http://"+rProbe+"/readyz", "", http.StatusOK))

	// A delivery signed with the secret the manager stored verifies: the receiver read it
	// from the route Secret, the only Secrets it may read.
	if code := stripeDelivery(t, rBind, "shop", "orders", string(route.Data[hookv1.SecretKeyCurrent]), "evt_charts_1"); code != http.StatusAccepted {
		t.Errorf("a delivery signed with the stored secret: %d, want 202", code)
	}
	// A secret written and at once used (GitHub's ping right after a create): the receiver's
	// watch may not have shown it yet; it reads the route Secret again instead of answering 401.
	route.Data[hookv1.SecretKeyPrefix+"we_new"] = []byte("whsec_new_" + randHex())
	if route, err = kube.CoreV1().Secrets("hw-system").Update(ctx, route, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := stripeDelivery(t, rBind, "shop", "orders", string(route.Data[hookv1.SecretKeyPrefix+"we_new"]), "evt_charts_2"); code != http.StatusAccepted {
		t.Errorf("a delivery signed with a secret written just before: %d, want 202", code)
	}

	rURL := "https://" + rMetrics + "/metrics"
	eventually(t, 20*time.Second, "receiver metrics without a token", wantStatus(rURL, "", http.StatusUnauthorized))
	var receiverMetrics string
	eventually(t, 20*time.Second, "receiver metrics for the scraper", func() error {
		code, body, err := httpGet(rURL, scraper)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		receiverMetrics = body
		return err
	})
	if series := `hookwarden_receiver_requests_total{name="",namespace="",result="unknown_route"} 0`; !strings.Contains(receiverMetrics, series) {
		t.Errorf("the receiver does not serve %s from the start", series)
	}
	for _, r := range receiver.Results() {
		series := `hookwarden_receiver_requests_total{name="orders",namespace="shop",result="` + r + `"} `
		if !strings.Contains(receiverMetrics, series) {
			t.Errorf("the receiver does not serve %s… for its route", series)
		}
	}
	if series := `hookwarden_receiver_requests_total{name="orders",namespace="shop",result="accepted"} 2`; !strings.Contains(receiverMetrics, series) {
		t.Errorf("the receiver does not count its two deliveries as %s", series)
	}

	checkMetricNames(t, scrapedNames(managerMetrics+receiverMetrics), scrapedLabels(managerMetrics+receiverMetrics), managerMetrics)

	// helm test runs `receiver probe` against the receiver's Service: the same arguments here,
	// the Service's address replaced by the receiver's.
	checkHelmTestProbe(t, "http://"+rBind, "http://"+mProbe)

	// The store goes away: the receiver is no longer ready (its deliveries would all be 503).
	dropDatabase(t, dsn)
	eventually(t, 30*time.Second, "receiver /readyz with its store gone", func() error {
		code, body, err := httpGet("http://"+rProbe+"/readyz?verbose", "")
		if err != nil {
			return err
		}
		if code != http.StatusInternalServerError || !strings.Contains(body, "store") {
			return fmt.Errorf("readyz %d: %s", code, body)
		}
		return nil
	})
	// Deleting the subscription deletes its route Secret (the manager's only Secret deletes).
	kubectl(t, nil, "-n", "shop", "delete", "whsub", "orders", "--wait=false")
	eventually(t, 60*time.Second, "the route Secret of a deleted subscription gone", func() error {
		_, err := kube.CoreV1().Secrets("hw-system").Get(ctx, routeKey, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	mgr.stop()
}

// stripeDelivery posts a Stripe-signed event to the receiver at addr and returns the status.
func stripeDelivery(t *testing.T, addr, ns, name, secret, id string) int {
	t.Helper()
	body := []byte(`{"id":"` + id + `","object":"event","type":"invoice.paid"}`)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/"+ns+"/"+name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(stripe.SignatureHeader, stripe.SignHeader(secret, time.Now(), body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// checkHelmTestProbe runs the chart's helm test pod's command (the receiver binary with the
// rendered arguments) against the receiver, and against something that is not one.
func checkHelmTestProbe(t *testing.T, receiverURL, notReceiverURL string) {
	t.Helper()
	pod := render(t, "hw", "hw-system").find("Pod", "hw-hookwarden-test-receiver")
	if pod == nil {
		t.Fatal("no helm test pod rendered")
	}
	cs, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	service := "http://hw-hookwarden-receiver.hw-system.svc:80"
	if len(args) == 0 || args[len(args)-1] != service {
		t.Fatalf("helm test pod args %v, want them to end with the receiver Service %s", args, service)
	}
	run := func(url string, timeout string) (string, error) {
		a := append(append([]string(nil), args[:len(args)-1]...), url)
		for i, x := range a {
			if strings.HasPrefix(x, "--timeout=") {
				a[i] = "--timeout=" + timeout
			}
		}
		return runCmd(t, nil, filepath.Join(binDir, "receiver"), a...)
	}
	out, err := run(receiverURL, "30s")
	if err != nil {
		t.Errorf("helm test's probe against the receiver: %v", err)
	}
	t.Logf("REPORT helm test probe: %s", strings.TrimSpace(out))
	if _, err := run(notReceiverURL, "1s"); err == nil {
		t.Errorf("helm test's probe passed against %s, which is not a receiver", notReceiverURL)
	}
}

func dropDatabase(t *testing.T, dsn string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin := os.Getenv(storetest.EnvPostgres)
	if admin == "" {
		admin = storetest.DefaultPostgres
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
}

// A manager watching team-a reconciles there, as its namespaced RBAC allows, and ignores a
// subscription in another namespace: no finalizer, no status.
func TestWatchNamespaceIgnoresOthers(t *testing.T) {
	testtier.RequiresServers(t, "helm, the image binaries and a control plane (envtest)")
	install(t)
	stripe := fake.New()
	apiURL, stopStripe := stripe.Start()
	defer stopStripe()
	apiKey := "sk_test_team_" + randHex()
	for _, ns := range []string{"team-a", "shop-2"} {
		credentials(t, ns, apiKey)
		kubectl(t, subscriptionYAML(ns, "payments", apiURL), "apply", "-f", "-")
	}
	kc, _ := saKubeconfig(t, "team-system", "team-hookwarden-manager")
	start(t, "manager", nil, "--kubeconfig", kc, "--watch-namespace=team-a", "--cluster-name=team", "--receiver-namespace=team-system",
		"--leader-elect=true", "--leader-election-namespace=team-system", "--metrics-bind-address=0",
		"--health-probe-bind-address="+freeAddr(t))
	waitReady(t, "team-a", "payments")
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if f := jsonpath(t, "shop-2", "payments", "{.metadata.finalizers}{.status}"); f != "" {
			t.Fatalf("a subscription outside --watch-namespace was touched: %s", f)
		}
	}
	if eps := stripe.Endpoints(apiKey); len(eps) != 1 || !strings.Contains(eps[0].URL, "/hooks/team-a/") {
		t.Errorf("endpoints at the provider %+v, want only team-a's", eps)
	}
	// Its route Secret is in the release namespace (a Role there), none for the other.
	eventually(t, 30*time.Second, "team-a/payments' route Secret in team-system", func() error {
		_, err := kube.CoreV1().Secrets("team-system").Get(context.Background(), routesecret.Name("team-a", "payments"), metav1.GetOptions{})
		return err
	})
	if _, err := kube.CoreV1().Secrets("team-system").Get(context.Background(), routesecret.Name("shop-2", "payments"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a route Secret for an ignored subscription: %v", err)
	}
}
