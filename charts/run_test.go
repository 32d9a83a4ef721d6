package charts_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hookwarden/hookwarden/providers/stripe/fake"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
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
    sink: {url: "http://127.0.0.1:9/events"}
`, ns, name, apiURL)
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
	mgr := start(t, "manager", nil, "--kubeconfig", mgrKC, "--leader-elect=true", "--leader-election-namespace=hw-system",
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

	// The receiver on PostgreSQL (the several-replica store), its DSN from the environment as
	// the chart passes it.
	dsn := storetest.PostgresDSN(t)
	recvKC, _ := saKubeconfig(t, "hw-system", "hw-hookwarden-receiver")
	rBind, rMetrics, rProbe := freeAddr(t), freeAddr(t), freeAddr(t)
	start(t, "receiver", []string{"HOOKWARDEN_STORE=" + dsn, "KUBECONFIG=" + recvKC}, "--bind-address="+rBind,
		"--metrics-bind-address="+rMetrics, "--metrics-secure", "--health-probe-bind-address="+rProbe)
	eventually(t, 60*time.Second, "receiver /readyz", wantStatus("http://"+rProbe+"/readyz", "", http.StatusOK))
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
	for _, r := range receiver.Results() {
		if series := `hookwarden_receiver_requests_total{result="` + r + `"} 0`; !strings.Contains(receiverMetrics, series) {
			t.Errorf("the receiver does not serve %s from the start", series)
		}
	}

	checkMetricNames(t, scrapedNames(managerMetrics+receiverMetrics), scrapedLabels(managerMetrics+receiverMetrics), managerMetrics)

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
	mgr.stop()
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
	start(t, "manager", nil, "--kubeconfig", kc, "--watch-namespace=team-a", "--cluster-name=team",
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
}
