package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/controllers"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/builtin"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// The suite runs the real reconciler in a real manager against a real kube-apiserver and etcd
// (envtest) and the stateful fakes (Stripe, GitHub, the REST APIs). Every scenario asserts
// what the provider holds and which requests it received, not only status.

const (
	clusterName  = "envtest"
	receiverBase = "https://Hooks.Example.com/base/"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8s       client.Client
	scheme    = runtime.NewScheme()
	stripeSrv *fake.Server
	stripeURL string
	// ghSrv is the fake GitHub; it delivers its pings to ghDeliveries.
	ghSrv        *ghfake.Server
	ghURL        string
	ghDeliveries *ghSink
	logs         = &syncBuffer{}
	suiteCtx     context.Context
	cancelAll    context.CancelFunc
)

func TestControllers(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest)")
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func() {
	// Manager logs go to the Ginkgo writer and to a buffer the secret-leak check greps.
	logf.SetLogger(zap.New(zap.WriteTo(ioMulti{GinkgoWriter, logs}), zap.UseDevMode(true), zap.Level(zapcore.DebugLevel)))
	suiteCtx, cancelAll = context.WithCancel(context.Background())
	// Waits without their own timeout get room for a loaded machine (Gomega's default is 1s):
	// they fail on what never happens, not on what happens slowly.
	SetDefaultEventuallyTimeout(15 * time.Second)

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(hookv1.AddToScheme(scheme)).To(Succeed())

	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		// Build (or find) kube-apiserver, etcd and kubectl the same way `make test` does.
		// Its progress lines (a cold build takes minutes) go to stderr, shown with -v.
		cp := exec.Command(filepath.Join("..", "hack", "control-plane.sh"), "--print-dir")
		cp.Stderr = os.Stderr
		out, err := cp.Output()
		Expect(err).NotTo(HaveOccurred(), "hack/control-plane.sh failed")
		assets = strings.TrimSpace(string(out))
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	stripeSrv = fake.New(fake.WithPageSize(3))
	var stop func()
	stripeURL, stop = stripeSrv.Start()
	DeferCleanup(stop)

	ghDeliveries = newGHSink()
	ghSrv = ghfake.New(ghfake.WithPageSize(2), ghfake.WithDeliveries(ghDeliveries.http))
	var stopGH func()
	ghURL, stopGH = ghSrv.Start()
	DeferCleanup(stopGH)
})

var _ = AfterSuite(func() {
	if cancelAll != nil {
		cancelAll()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// managerOptions tune one manager run.
type managerOptions struct {
	afterCreate func(ctx context.Context, sub *hookv1.WebhookSubscription, reg providers.Registration) error
	listTTL     time.Duration
	qps         float64
	// leaderElection runs the manager as one replica of several (a short lease, released on stop).
	leaderElection bool
	// metrics, when set, receives the manager's own series.
	metrics prometheus.Registerer
	// logger, when set, is the manager's logger instead of the suite's.
	logger logr.Logger
	// receiverNamespace, when set, has the manager keep route Secrets there (as
	// --receiver-namespace), swept every routeSweep.
	receiverNamespace string
	routeSweep        time.Duration
	// registry, when set, replaces the builtin provider registry.
	registry providers.Registry
	// tracing, when set, is the manager's (as cmd/manager's from OTEL_*).
	tracing *telemetry.Tracing
}

// runningManager is one manager process, as far as the cluster and the provider can tell:
// restarting it drops every in-memory cache.
type runningManager struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *runningManager) Stop() {
	m.cancel()
	<-m.done
}

// Stopped reports whether the manager has exited (for the crash scenario).
func (m *runningManager) Stopped() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func startManager(o managerOptions) *runningManager {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// As cmd/manager: Secrets and ConfigMaps watched by metadata, read uncached.
		Cache:                         controllers.CacheOptions(nil),
		Client:                        controllers.ClientOptions(),
		Logger:                        o.logger,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                o.leaderElection,
		LeaderElectionID:              "hookwarden-envtest.hookwarden.io",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(4 * time.Second),
		RenewDeadline:                 ptr.To(3 * time.Second),
		RetryPeriod:                   ptr.To(500 * time.Millisecond),
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	qps := o.qps
	if qps == 0 {
		qps = 200
	}
	registry := o.registry
	if registry == nil {
		registry = builtin.Registry()
	}
	var metrics *controllers.Metrics
	if o.metrics != nil {
		metrics, err = controllers.NewMetrics(o.metrics)
		Expect(err).NotTo(HaveOccurred())
	}
	r := &controllers.Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("hookwarden-manager"),
		Accounts:    account.NewAccounts(registry, account.AccountOptions{QPS: qps, Burst: 50, RequestTimeout: 5 * time.Second, Metrics: metrics.Provider(), Tracing: o.tracing}),
		Metrics:     metrics,
		ClusterName: clusterName,
		ListTTL:     o.listTTL,
		AfterCreate: o.afterCreate,
		// The bundled receiver's public URL, for spec.endpoint.receiver.
		ReceiverBaseURL: receiverBase,
		// The scenarios look for the Events of their subscriptions; the budget has a test of
		// its own (TestEventBudget), with its own clock.
		Events:  controllers.EventBudget{PerSecond: -1},
		Tracing: o.tracing,
	}
	if o.receiverNamespace != "" {
		r.RouteSecrets = &controllers.RouteSecrets{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
			Namespace: o.receiverNamespace, Interval: o.routeSweep, Log: logf.Log.WithName("route-secrets")}
		Expect(mgr.Add(r.RouteSecrets)).To(Succeed())
	}
	ctx, cancel := context.WithCancel(suiteCtx)
	Expect(r.SetupWithManager(ctx, mgr)).To(Succeed())
	m := &runningManager{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return m
}

// tenant is one test's namespace and Stripe account (its own API key, so the fake keeps its
// endpoints and request log apart from other tests).
type tenant struct {
	ns     string
	apiKey string
	srvURL string
	srv    *fake.Server
}

var tenantSeq int
var tenantMu sync.Mutex

func newTenant() *tenant {
	return newTenantOn(stripeSrv, stripeURL)
}

func newTenantOn(srv *fake.Server, url string) *tenant {
	tenantMu.Lock()
	tenantSeq++
	n := tenantSeq
	tenantMu.Unlock()
	t := &tenant{ns: fmt.Sprintf("t%d-%d", n, time.Now().UnixNano()%100000), apiKey: fmt.Sprintf("sk_test_tenant%d_%d", n, time.Now().UnixNano()), srv: srv, srvURL: url}
	Expect(k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.ns}})).To(Succeed())
	t.writeCredentials()
	return t
}

func (t *tenant) writeCredentials() {
	Expect(k8s.Create(suiteCtx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: "stripe-api"},
		StringData: map[string]string{"apiKey": t.apiKey},
	})).To(Succeed())
}

// sub returns a valid subscription for this tenant; mutate it before creating it.
func (t *tenant) sub(name, url string) *hookv1.WebhookSubscription {
	return &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.ns, Name: name},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider: hookv1.ProviderSpec{
				Type:           hookv1.ProviderStripe,
				CredentialsRef: hookv1.SecretKeySelector{Name: "stripe-api", Key: "apiKey"},
				APIURL:         t.srvURL,
			},
			Endpoint:       hookv1.EndpointSpec{URL: url},
			Events:         []string{"checkout.session.completed", "invoice.paid"},
			Description:    "orders pipeline",
			SigningSecret:  hookv1.SigningSecretSpec{Name: name + "-signing"},
			ResyncInterval: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
}

func (t *tenant) endpoints() []fake.Endpoint { return t.srv.Endpoints(t.apiKey) }

func (t *tenant) registrations() map[string]string {
	out := map[string]string{}
	for _, e := range t.endpoints() {
		out[e.ID] = e.URL
	}
	return out
}

func (t *tenant) credentials() client.ObjectKey {
	return client.ObjectKey{Namespace: t.ns, Name: "stripe-api"}
}

// requests returns this tenant's requests to the fake matching method and path prefix.
func (t *tenant) requests(method, pathPrefix string) []fake.Request {
	label := fake.AccountLabel(t.apiKey)
	var out []fake.Request
	for _, r := range t.srv.Requests() {
		if r.Account == label && (method == "" || r.Method == method) && strings.HasPrefix(r.Path, pathPrefix) {
			out = append(out, r)
		}
	}
	return out
}

// creates counts create requests (POST to the collection) for this tenant.
func (t *tenant) creates() int {
	n := 0
	for _, r := range t.requests("POST", "/v1/webhook_endpoints") {
		if r.Path == "/v1/webhook_endpoints" {
			n++
		}
	}
	return n
}

// listCalls returns this tenant's list calls (first pages only).
func (t *tenant) listCalls() []fake.Request {
	var out []fake.Request
	for _, r := range t.requests("GET", "/v1/webhook_endpoints") {
		if r.Path == "/v1/webhook_endpoints" && r.Query.Get("starting_after") == "" {
			out = append(out, r)
		}
	}
	return out
}

// lists counts list calls (first pages only) for this tenant.
func (t *tenant) lists() int { return len(t.listCalls()) }

func get(g Gomega, s *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
	out := &hookv1.WebhookSubscription{}
	g.Expect(k8s.Get(suiteCtx, client.ObjectKeyFromObject(s), out)).To(Succeed())
	return out
}

func condition(s *hookv1.WebhookSubscription, typ string) *metav1.Condition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == typ {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

// expectReady waits until the subscription is Ready for its current generation.
func expectReady(s *hookv1.WebhookSubscription) *hookv1.WebhookSubscription {
	var out *hookv1.WebhookSubscription
	Eventually(func(g Gomega) {
		out = get(g, s)
		c := condition(out, hookv1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Ready: %s %s", c.Reason, c.Message)
		g.Expect(out.Status.ObservedGeneration).To(Equal(out.Generation))
		g.Expect(condition(out, hookv1.ConditionReconciling)).To(BeNil())
		g.Expect(condition(out, hookv1.ConditionStalled)).To(BeNil())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return out
}

func signingSecret(g Gomega, s *hookv1.WebhookSubscription) *corev1.Secret {
	sec := &corev1.Secret{}
	g.Expect(k8s.Get(suiteCtx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.SigningSecret.Name}, sec)).To(Succeed())
	return sec
}

func eventsFor(g Gomega, s *hookv1.WebhookSubscription) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8s.List(suiteCtx, &list, client.InNamespace(s.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == s.Name {
			out = append(out, e)
		}
	}
	return out
}

func hasEvent(g Gomega, s *hookv1.WebhookSubscription, reason, substr string) bool {
	for _, e := range eventsFor(g, s) {
		if e.Reason == reason && strings.Contains(e.Note, substr) {
			return true
		}
	}
	return false
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type ioMulti struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (m ioMulti) Write(p []byte) (int, error) {
	m.a.Write(p) //nolint:errcheck // the Ginkgo writer is best effort
	return m.b.Write(p)
}
