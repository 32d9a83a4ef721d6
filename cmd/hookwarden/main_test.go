package main

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/controllers"
	"github.com/hookwarden/hookwarden/internal/testenv"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers/builtin"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// The command line runs end to end: a real API server (envtest) with the CRD, the real
// reconciler to bring subscriptions to a recorded state, the fake Stripe and GitHub over HTTP,
// and the commands run as a user runs them (flags, kubeconfig), their output compared with
// golden files in testdata (go test ./cmd/hookwarden -update rewrites them).

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const clusterName = "envtest"

var (
	env       *testenv.Env
	stripeSrv *stripefake.Server
	stripeURL string
	ghSrv     *ghfake.Server
	ghURL     string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testtier.Short() {
		testtier.SkippingSetup("cmd/hookwarden", "the control plane and the fakes")
		os.Exit(m.Run())
	}
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	dir, err := os.MkdirTemp("", "hookwarden-cli")
	if err != nil {
		panic(err)
	}
	env, err = testenv.Start(filepath.Join("..", ".."), dir, "admin")
	if err != nil {
		panic(err)
	}
	stripeSrv = stripefake.New(stripefake.WithPageSize(3))
	var stopStripe, stopGH func()
	stripeURL, stopStripe = stripeSrv.Start()
	ghSrv = ghfake.New(ghfake.WithPageSize(2))
	ghURL, stopGH = ghSrv.Start()
	code := m.Run()
	stopStripe()
	stopGH()
	_ = env.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// zapLevel keeps the manager quiet unless -v is given.
func zapLevel() zapcore.Level {
	if testing.Verbose() {
		return zapcore.InfoLevel
	}
	return zapcore.ErrorLevel
}

// requestLog counts the requests the command line sends to the API server.
type requestLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD path"
}

func (l *requestLog) wrap(cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			l.mu.Lock()
			l.reqs = append(l.reqs, r.Method+" "+r.URL.Path)
			l.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// run runs the command line as a user would, with the test's kubeconfig.
func run(t *testing.T, log *requestLog, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runAs(t, log, env.Kubeconfig, args...)
}

// runWithKubeconfig runs the command line with another kubeconfig.
func runWithKubeconfig(t *testing.T, kubeconfig string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runAs(t, nil, kubeconfig, args...)
}

func runAs(t *testing.T, log *requestLog, kubeconfig string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := cli.Options{Streams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}}
	if log != nil {
		o.WrapConfig = log.wrap
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = cli.Run(ctx, append(args, "--kubeconfig", kubeconfig), o)
	return code, out.String(), errOut.String()
}

// golden compares got with testdata/name, after replacing each key of subst by its value
// (provider ids and UIDs the run chose; see normalize).
func golden(t *testing.T, name, got string, subst map[string]string) {
	t.Helper()
	got = normalize(got, subst)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// normalize replaces each key of subst in got by its value, the longest key first: the result
// is the same whatever order the map iterates in (a key inside another, such as an id inside a
// message, is replaced within it only when the longer one is not in got).
func normalize(got string, subst map[string]string) string {
	froms := make([]string, 0, len(subst))
	for from := range subst {
		froms = append(froms, from)
	}
	sort.Slice(froms, func(i, j int) bool {
		if len(froms[i]) != len(froms[j]) {
			return len(froms[i]) > len(froms[j])
		}
		return froms[i] < froms[j]
	})
	for _, from := range froms {
		got = strings.ReplaceAll(got, from, sameWidth(subst[from], from))
	}
	return got
}

// sameWidth pads (with dots) or cuts placeholder to the width of what it replaces, so table
// columns stay aligned in the golden files.
func sameWidth(placeholder, orig string) string {
	if len(placeholder) >= len(orig) {
		return placeholder[:len(orig)]
	}
	return placeholder + strings.Repeat(".", len(orig)-len(placeholder))
}

// startManager runs the real reconciler (changed by opts) until the returned stop is called.
func startManager(t *testing.T, opts ...func(*controllers.Reconciler)) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  controllers.CacheOptions(nil),
		Client:                 controllers.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("hookwarden-manager"),
		Accounts:    account.NewAccounts(builtin.Registry(), account.AccountOptions{QPS: 200, Burst: 50, RequestTimeout: 5 * time.Second}),
		ClusterName: clusterName,
	}
	for _, o := range opts {
		o(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
}

// tenant is one test's namespace with a Stripe key and a GitHub token of its own.
type tenant struct {
	ns, apiKey, token, repo string
}

// newTenant is where every test of the command line against a cluster starts: under -short
// (make unit) the control plane and the fakes are not started, and such a test skips here.
func newTenant(t *testing.T, g *WithT, name string) *tenant {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	tn := &tenant{ns: name, apiKey: "sk_test_" + name, token: "ghp_" + name, repo: "repos/acme/" + name}
	ghSrv.Grant(tn.token, tn.repo)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.ns}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "stripe-api"}, StringData: map[string]string{"apiKey": tn.apiKey}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "github-api"}, StringData: map[string]string{"token": tn.token}})).To(Succeed())
	return tn
}

func (tn *tenant) stripeSub(name, url string, events ...string) *hookv1.WebhookSubscription {
	return &hookv1.WebhookSubscription{
		TypeMeta:   metav1.TypeMeta{APIVersion: hookv1.GroupVersion.String(), Kind: "WebhookSubscription"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider:      hookv1.ProviderSpec{Type: hookv1.ProviderStripe, CredentialsRef: hookv1.SecretKeySelector{Name: "stripe-api", Key: "apiKey"}, APIURL: stripeURL},
			Endpoint:      hookv1.EndpointSpec{URL: url},
			Events:        events,
			Description:   name + " pipeline",
			SigningSecret: hookv1.SigningSecretSpec{Name: name + "-signing"},
		},
	}
}

func (tn *tenant) githubSub(name, url string, events ...string) *hookv1.WebhookSubscription {
	owner, repo, _ := strings.Cut(strings.TrimPrefix(tn.repo, "repos/"), "/")
	return &hookv1.WebhookSubscription{
		TypeMeta:   metav1.TypeMeta{APIVersion: hookv1.GroupVersion.String(), Kind: "WebhookSubscription"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider:      hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, CredentialsRef: hookv1.SecretKeySelector{Name: "github-api"}, APIURL: ghURL, GitHub: &hookv1.GitHubTarget{Owner: owner, Repository: repo}},
			Endpoint:      hookv1.EndpointSpec{URL: url},
			Events:        events,
			SigningSecret: hookv1.SigningSecretSpec{Name: name + "-signing"},
		},
	}
}

// expectReady waits until the manager has brought sub to Ready and returns it.
func expectReady(g *WithT, sub *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
	out := &hookv1.WebhookSubscription{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(sub), out)).To(Succeed())
		var ready *metav1.Condition
		for i := range out.Status.Conditions {
			if out.Status.Conditions[i].Type == hookv1.ConditionReady {
				ready = &out.Status.Conditions[i]
			}
		}
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", ready.Reason, ready.Message)
		g.Expect(out.Status.ObservedGeneration).To(Equal(out.Generation))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return out
}

// TestNormalize: a golden's normalization does not depend on map order. TestStatus once
// replaced the whole Ready message in one run and only the id inside it in another.
func TestNormalize(t *testing.T) {
	subst := map[string]string{"we_1": "<id>", "registration we_1 matches": "<ready>"}
	const got = "registration we_1 matches; we_1"
	first := normalize(got, subst)
	for range 200 {
		if again := normalize(got, subst); again != first {
			t.Fatalf("normalize gave %q, then %q", first, again)
		}
	}
	if want := "<ready>..................; <id>"; first != want {
		t.Errorf("normalize = %q, want %q", first, want)
	}
}
