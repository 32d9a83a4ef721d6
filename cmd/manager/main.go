// Command manager runs the Hookwarden controller manager: it reconciles WebhookSubscriptions
// against provider accounts. It finds its cluster like any controller-runtime program
// (--kubeconfig, KUBECONFIG, in-cluster config).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	krest "k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/controllers"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/internal/version"
	"github.com/hookwarden/hookwarden/providers/builtin"
	"github.com/hookwarden/hookwarden/providers/rest"
)

type options struct {
	metricsAddr     string
	metricsSecure   bool
	metricsCertPath string
	probeAddr       string
	pprofAddr       string
	leaderElect     bool
	leaderElectNS   string
	leaseDuration   time.Duration
	renewDeadline   time.Duration
	retryPeriod     time.Duration
	clusterName     string
	watchNamespaces []string
	listTTL         time.Duration
	providerQPS     float64
	providerBurst   int
	events          controllers.EventBudget
	kubeQPS         float64
	kubeBurst       int
	requestTimeout  time.Duration
	concurrency     int
	outageGrace     time.Duration
	receiverBase    string
	receiverNS      string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "validate-profile" {
		os.Exit(validateProfiles(os.Args[2:], os.Stdout, os.Stderr))
	}
	var o options
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the metrics endpoint binds to; \"0\" disables it")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", false, "serve metrics over HTTPS and only to clients whose token may GET /metrics (TokenReview and SubjectAccessReview, as kubebuilder v4 does)")
	flag.StringVar(&o.metricsCertPath, "metrics-cert-path", "", "directory with tls.crt and tls.key for --metrics-secure (default: a self-signed certificate made at start)")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health probe endpoint binds to")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address Go's /debug/pprof endpoints bind to (heap, goroutines); \"0\" disables them")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so that only one replica talks to providers")
	flag.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	flag.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits after the leader's last renewal before taking over (a killed leader's work resumes after this)")
	flag.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it stops (and exits); shorter than --leader-elect-lease-duration")
	flag.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	flag.StringVar(&o.clusterName, "cluster-name", "", "name of this cluster in ownership markers; clusters sharing a provider account must use different names (default: the UID of the kube-system namespace, unique per cluster)")
	flag.Func("watch-namespace", "reconcile subscriptions in these namespaces only (comma-separated; default: all); subscriptions elsewhere are ignored", func(s string) error {
		o.watchNamespaces = splitList(s)
		return nil
	})
	flag.DurationVar(&o.listTTL, "list-ttl", 30*time.Second, "longest time one provider list serves the other subscriptions on the same account")
	flag.Float64Var(&o.providerQPS, "provider-qps", 0, "requests per second made with one credential, shared by all its subscriptions, for every provider; 0: the provider's documented rate (Stripe 25/s for test keys, 100/s for sk_live_/rk_live_; GitHub 1.2/s), 10 where none is documented")
	flag.IntVar(&o.providerBurst, "provider-burst", 0, "burst of requests made with one credential; 0: the provider's documented burst (Stripe 5 test, 10 live; GitHub 8), 5 where none is documented")
	flag.DurationVar(&o.requestTimeout, "provider-timeout", 20*time.Second, "timeout of one provider request")
	flag.StringVar(&o.receiverBase, "receiver-base-url", "", "public base URL of the bundled receiver (e.g. https://hooks.example.com); subscriptions with spec.endpoint.receiver register <base>/hooks/<namespace>/<name>")
	flag.StringVar(&o.receiverNS, "receiver-namespace", routesecret.PodNamespace(), "namespace of the bundled receiver, where the manager keeps its copy of each subscription's signing material (the receiver reads Secrets there only); default: the manager's own namespace in a cluster, none outside one (no copies)")
	flag.IntVar(&o.concurrency, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles, "subscriptions reconciled in parallel (one account is always serialized)")
	flag.DurationVar(&o.outageGrace, "provider-outage-grace", controllers.DefaultOutageGrace, "how long a registration last found matching its spec stays Ready while the provider keeps failing (5xx, timeouts, rate limits); Reconciling says a retry is pending meanwhile")
	zapOpts := zap.Options{}
	flag.Float64Var(&o.events.PerSecond, "event-qps", controllers.DefaultEventBudget.PerSecond, "Normal Events sent per second once --event-burst is spent (a busy start would otherwise cost the API server one more write per new subscription); past it they are counted in hookwarden_events_suppressed_total and not sent; Warnings are always sent; negative: send every Event")
	flag.IntVar(&o.events.Burst, "event-burst", controllers.DefaultEventBudget.Burst, "Normal Events sent at once before --event-qps applies")
	flag.Float64Var(&o.kubeQPS, "kube-api-qps", 0, "requests per second to the Kubernetes API server, client side; 0: no client-side limit (the API server's priority and fairness decides), as controller-runtime sets it")
	flag.IntVar(&o.kubeBurst, "kube-api-burst", 0, "burst of requests to the Kubernetes API server with --kube-api-qps (default: twice the rate)")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println("manager", version.Get())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	cfg, err := ctrl.GetConfig()
	if err == nil && o.kubeQPS > 0 {
		cfg.QPS, cfg.Burst = float32(o.kubeQPS), o.kubeBurst
		if cfg.Burst <= 0 {
			cfg.Burst = max(int(2*o.kubeQPS), 1)
		}
	}
	if err == nil {
		err = run(ctrl.SetupSignalHandler(), cfg, o)
	}
	if err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// validateProfiles checks REST profile files before anything is sent (manager
// validate-profile FILE...): it prints each problem with its field path and returns the exit
// code, 1 when any file is invalid.
func validateProfiles(files []string, stdout, stderr io.Writer) int {
	if len(files) == 0 {
		fmt.Fprintln(stderr, "usage: manager validate-profile FILE...")
		return 2
	}
	code := 0
	for _, f := range files {
		p, err := rest.ParseFile(f)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", f, err)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "%s: profile %s is valid\n", f, p.Name)
	}
	return code
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// clusterNameSource is the namespace whose UID names the cluster by default: every cluster has
// it, it is never deleted, and its UID is random per cluster.
const clusterNameSource = metav1.NamespaceSystem

// resolveClusterName returns the --cluster-name, or the kube-system namespace's UID when it is
// empty. A default that cannot be read is an error, never a silent shared name: two clusters
// with the same name on one provider account would prune each other's registrations.
func resolveClusterName(ctx context.Context, r client.Reader, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ns corev1.Namespace
	if err := r.Get(ctx, types.NamespacedName{Name: clusterNameSource}, &ns); err != nil {
		return "", fmt.Errorf("--cluster-name is empty and its default, the UID of namespace %s, is unreadable (the manager needs get on namespaces/%s, or set --cluster-name to a name unique among the clusters sharing a provider account): %w", clusterNameSource, clusterNameSource, err)
	}
	return string(ns.UID), nil
}

//nolint:funlen // the manager's wiring in the order it starts: each step one statement
func run(ctx context.Context, cfg *krest.Config, o options) error {
	// OTEL_* settings; off unless configured, and never a reason not to start. On, the manager
	// writes a span per reconcile, a child per provider request (without ever sending the
	// provider our trace context) and a span per recovery run with a child per page.
	tracing := telemetry.Setup(ctx, telemetry.Options{Service: "hookwarden-manager", Version: version.Get().Version,
		Registerer: ctrlmetrics.Registry, Log: ctrl.Log.WithName("tracing")})
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(sctx)
	}()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := hookv1.AddToScheme(scheme); err != nil {
		return err
	}
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		metricsOpts.SecureServing = true
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
		metricsOpts.CertDir = o.metricsCertPath
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// With --watch-namespace the cache, and so every watch and cached read, sees those
		// namespaces only; the RBAC of that mode grants nothing elsewhere. Secrets and
		// ConfigMaps are never cached whole, whatever the mode.
		Cache:                         controllers.CacheOptions(o.watchNamespaces),
		Client:                        controllers.ClientOptions(),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "hookwarden-manager.hookwarden.io",
		LeaderElectionNamespace:       o.leaderElectNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	clusterName, err := resolveClusterName(ctx, mgr.GetAPIReader(), o.clusterName)
	if err != nil {
		return err
	}
	registry := builtin.Registry()
	// Served with controller-runtime's own metrics on --metrics-bind-address.
	metrics, err := controllers.NewMetrics(ctrlmetrics.Registry)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	r := &controllers.Reconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("hookwarden-manager"),
		Accounts:                account.NewAccounts(registry, account.AccountOptions{QPS: o.providerQPS, Burst: o.providerBurst, RequestTimeout: o.requestTimeout, Metrics: metrics.Provider(), Tracing: tracing}),
		Metrics:                 metrics,
		ClusterName:             clusterName,
		ListTTL:                 o.listTTL,
		ReceiverBaseURL:         o.receiverBase,
		MaxConcurrentReconciles: o.concurrency,
		OutageGrace:             o.outageGrace,
		Events:                  o.events,
		Tracing:                 tracing,
	}
	if o.receiverNS != "" {
		r.RouteSecrets = &controllers.RouteSecrets{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
			Namespace: o.receiverNS, Log: ctrl.Log.WithName("route-secrets")}
		if err := mgr.Add(r.RouteSecrets); err != nil {
			return err
		}
	} else {
		ctrl.Log.Info("--receiver-namespace is empty: no route Secrets are written, so a bundled receiver verifies nothing (fine when there is none)")
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", informersSynced(mgr.GetCache())); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "version", version.Get().Version, "cluster", clusterName,
		"leaderElection", o.leaderElect, "watchNamespaces", o.watchNamespaces, "receiverNamespace", o.receiverNS)
	return mgr.Start(ctx)
}

// informersSynced is ready once every informer the controllers use has listed its objects:
// before that a standby replica taking over would act on an empty view. Every replica syncs its
// cache, leader or not.
func informersSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informers not synced yet")
		}
		return nil
	}
}
