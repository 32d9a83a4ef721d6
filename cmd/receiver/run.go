package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/internal/version"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/builtin"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

const defaultStore = "sqlite://receiver.db"

type options struct {
	bindAddr, metricsAddr, probeAddr string
	metricsSecure                    bool
	metricsCertPath                  string
	storeDSN                         string
	storePromise                     string
	storePasswordFile                string
	namespaces                       []string
	receiverNS                       string
	maxBody                          int64
	claimTimeout                     time.Duration
	committers                       int
	workers, sinkWorkers             int
	lease, pollInterval              time.Duration
	deliveryTimeout                  time.Duration
	retryBase, retryMax              time.Duration
	retention, sweepInterval         time.Duration
	shutdownGrace                    time.Duration
}

// storeEnv may hold the store DSN instead of --store: a DSN with a password then comes from a
// Secret through the environment, not through the command line every process can read.
const storeEnv = "HOOKWARDEN_STORE"

func defaultOptions() options {
	dsn := defaultStore
	if v := os.Getenv(storeEnv); v != "" {
		dsn = v
	}
	return options{
		bindAddr: ":8080", metricsAddr: ":9090", probeAddr: ":8081", storeDSN: dsn, storePromise: store.PromiseStrict.String(),
		maxBody: 5 << 20, claimTimeout: 10 * time.Second, workers: deliver.DefaultWorkers,
		lease: deliver.DefaultLease, pollInterval: deliver.DefaultPollInterval, deliveryTimeout: deliver.DefaultTimeout,
		retryBase: deliver.DefaultBackoffBase, retryMax: deliver.DefaultBackoffMax, retention: receiver.DefaultDedupeWindow,
		sweepInterval: 10 * time.Minute, shutdownGrace: deliver.DefaultGrace, receiverNS: routesecret.PodNamespace(),
	}
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.bindAddr, "bind-address", o.bindAddr, "address deliveries arrive on (POST /hooks/<namespace>/<name>)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr, "Prometheus metrics address; \"0\" disables")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", o.probeAddr, "/healthz and /readyz address")
	fs.StringVar(&o.storeDSN, "store", o.storeDSN, "durable store: sqlite:///path/file.db (embedded, one replica), postgres://... or redis://... / rediss://... (several replicas); default $"+storeEnv+" if set")
	fs.StringVar(&o.storePromise, "store-promise", o.storePromise, "weakest promise to run with: strict, at-least-once (Redis may evict delivered events' dedupe keys) "+
		"or best-effort (Redis may lose acknowledged events); the receiver refuses to start when its Redis allows less")
	bindStorePassword(fs, &o.storePasswordFile)
	fs.BoolVar(&o.metricsSecure, "metrics-secure", o.metricsSecure, "serve metrics over HTTPS and only to clients whose token may GET /metrics (TokenReview and SubjectAccessReview, as kubebuilder v4 does)")
	fs.StringVar(&o.metricsCertPath, "metrics-cert-path", o.metricsCertPath, "directory with tls.crt and tls.key for --metrics-secure (default: a self-signed certificate made at start)")
	watch := func(s string) error {
		o.namespaces = nil
		for _, ns := range strings.Split(s, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				o.namespaces = append(o.namespaces, ns)
			}
		}
		return nil
	}
	fs.Func("watch-namespace", "route subscriptions in these namespaces only (comma-separated; default: all), as the manager's flag of the same name", watch)
	fs.Func("namespace", "old name of --watch-namespace", watch)
	fs.StringVar(&o.receiverNS, "receiver-namespace", o.receiverNS, "the receiver's own namespace, where the manager writes the route Secrets it verifies with (the manager's --receiver-namespace); the only namespace whose Secrets it reads. Default: the pod's namespace in a cluster; required outside one")
	fs.Int64Var(&o.maxBody, "max-body-bytes", o.maxBody, "largest delivery body accepted (413 above)")
	fs.IntVar(&o.committers, "store-committers", o.committers, "group commits in flight at once (0: 1 for SQLite, 2 for PostgreSQL; raise it for a remote database)")
	fs.DurationVar(&o.claimTimeout, "claim-timeout", o.claimTimeout, "longest wait for the durable commit before answering 503")
	fs.IntVar(&o.workers, "workers", o.workers, "concurrent deliveries to sinks")
	fs.IntVar(&o.sinkWorkers, "sink-workers", o.sinkWorkers, "one sink's share of --workers while the other sinks of its subscription have work, so a slow sink never takes them all (0: half of --workers)")
	fs.DurationVar(&o.lease, "lease", o.lease, "how long a delivery stays with its worker; a crashed worker's delivery is retried after it")
	fs.DurationVar(&o.pollInterval, "poll-interval", o.pollInterval, "how often the queue is checked for due deliveries")
	fs.DurationVar(&o.deliveryTimeout, "delivery-timeout", o.deliveryTimeout, "timeout of one delivery to a sink")
	fs.DurationVar(&o.retryBase, "retry-base", o.retryBase, "first retry delay (exponential backoff with full jitter)")
	fs.DurationVar(&o.retryMax, "retry-max", o.retryMax, "longest retry delay")
	fs.DurationVar(&o.retention, "retention", o.retention, "how long event ids are remembered for dedupe (a subscription's spec.delivery.dedupeWindow or spec.delivery.retention extends it)")
	fs.DurationVar(&o.sweepInterval, "sweep-interval", o.sweepInterval, "how often expired ledger entries are removed")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", o.shutdownGrace, "how long shutdown waits for in-flight requests and deliveries")
}

func (o options) validate() error {
	switch {
	case o.maxBody <= 0:
		return errors.New("--max-body-bytes must be positive")
	case o.lease <= o.deliveryTimeout:
		return fmt.Errorf("--lease (%s) must exceed --delivery-timeout (%s), or a slow delivery would be taken over mid-flight", o.lease, o.deliveryTimeout)
	case o.retention < time.Minute:
		return errors.New("--retention must be at least 1m")
	case o.receiverNS == "":
		return errors.New("--receiver-namespace is empty and this is not a pod: give the namespace where the manager writes route Secrets (its --receiver-namespace)")
	}
	return nil
}

// verifiers maps provider types to their signature schemes, and schemes to the builders of
// schemes described per account (in the signing Secret); main owns the registry.
func verifiers(registry providers.Registry) (map[string]providers.Verifier, map[string]func([]byte) (providers.Verifier, error)) {
	fixed := map[string]providers.Verifier{}
	described := map[string]func([]byte) (providers.Verifier, error){}
	for t, p := range registry {
		if p.Verifier != nil {
			fixed[t] = p.Verifier
		}
		if p.VerifierFromSpec != nil {
			described[t] = p.VerifierFromSpec
		}
	}
	return fixed, described
}

//nolint:funlen // the receiver's wiring in start-up order, read top to bottom
func run(ctx context.Context, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	log := ctrl.Log.WithName("receiver")
	// OTEL_* settings; off unless configured, and never a reason not to start.
	tracing := telemetry.Setup(ctx, telemetry.Options{Service: "hookwarden-receiver", Version: version.Get().Version,
		Registerer: metrics.Registry, Log: log.WithName("tracing")})
	defer func() {
		// After the manager has stopped: the last deliveries' spans are flushed.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(sctx); err != nil {
			log.Info("Flushing spans at shutdown failed", "error", err.Error())
		}
	}()
	replica, _ := os.Hostname() // the pod's name in Kubernetes
	minPromise, err := store.ParsePromise(o.storePromise)
	if err != nil {
		return fmt.Errorf("--store-promise: %w", err)
	}
	st, err := openStore(ctx, o.storeDSN, o.storePasswordFile, store.WithMinPromise(minPromise), store.WithRetention(o.retention))
	if err != nil {
		return fmt.Errorf("opening the store: %w", err)
	}
	defer st.Close()
	promise := store.PromiseOf(st)
	if promise != store.PromiseStrict {
		log.Info("WARNING: the store keeps a weaker promise than SQLite and PostgreSQL, as --store-promise accepts",
			"promise", promise.String(), "reasons", promiseReasons(st))
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := hookv1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the cluster: %w", err)
	}
	// Secrets only in the receiver's namespace, and only the route Secrets there.
	cacheOpts := receiver.CacheOptions(o.receiverNS, o.namespaces)
	// The dead-letter admin API shares the metrics listener and, with --metrics-secure, its
	// authentication and authorization (receiver.AdminPath).
	routes := receiver.NewRoutes()
	admin := &receiver.Admin{Store: st, Routes: routes, Now: time.Now}
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, ExtraHandlers: admin.Handlers()}
	if o.metricsSecure {
		metricsOpts.SecureServing = true
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
		metricsOpts.CertDir = o.metricsCertPath
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          false, // every replica serves and delivers; the store coordinates
		GracefulShutdownTimeout: &o.shutdownGrace,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	rmetrics := receiver.NewMetrics(metrics.Registry)
	// REST profiles describe their scheme in the signing Secret.
	fixed, schemes := verifiers(builtin.Registry())
	dmetrics, err := deliver.NewMetrics(metrics.Registry)
	if err != nil {
		return err
	}
	reconciler := &receiver.RouteReconciler{Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: o.receiverNS,
		Routes: routes, Schemes: schemes, Metrics: rmetrics, SinkMetrics: dmetrics}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		return err
	}
	// Deliveries are served, and queued events delivered, only once every subscription has its
	// route: before that a known subscription would get 404 and its events no sink.
	routed := make(chan struct{})
	waitRouted := func(ctx context.Context) bool {
		select {
		case <-routed:
			return true
		case <-ctx.Done():
			return false
		}
	}

	batcher := store.NewBatcher(st, store.BatcherOptions{CommitTimeout: o.claimTimeout, Committers: o.committers})
	defer batcher.Close()
	rmetrics.SetStorePromise(storeKind(o.storeDSN), promise.String())
	handler := &receiver.Handler{
		Routes: routes, Verifiers: fixed, Claims: batcher, MaxBody: o.maxBody, ClaimTimeout: o.claimTimeout,
		Metrics: rmetrics, Log: log, Now: time.Now, Refresher: reconciler, Tracing: tracing,
	}
	pool := deliver.New(st, deliver.NewSender(deliver.SenderOptions{Timeout: o.deliveryTimeout}), routes.Resolve, deliver.Options{
		Workers: o.workers, SinkWorkers: o.sinkWorkers, Lease: o.lease, PollInterval: o.pollInterval, Wake: batcher.Committed(),
		// The store closes when the manager stops: the pool's outcome records must be done by then.
		Grace:   deliver.GraceWithin(o.shutdownGrace),
		Backoff: deliver.Backoff{Base: o.retryBase, Max: o.retryMax}, Logger: log.WithName("deliver"), Metrics: dmetrics,
		Tracing: tracing, Replica: replica,
	})

	srv := &http.Server{
		Addr: o.bindAddr, Handler: handler.Mux(),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
	}
	for _, r := range []manager.Runnable{
		manager.RunnableFunc(func(ctx context.Context) error {
			if err := reconciler.WaitRouted(ctx, 50*time.Millisecond); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("building the route table: %w", err)
			}
			log.Info("route table built", "routes", routes.Len())
			close(routed)
			return nil
		}),
		httpServer(srv, o.shutdownGrace, waitRouted),
		manager.RunnableFunc(func(ctx context.Context) error {
			if !waitRouted(ctx) {
				return nil
			}
			return pool.Run(ctx)
		}),
		manager.RunnableFunc(func(ctx context.Context) error { return sweep(ctx, st, routes, o, log) }),
		manager.RunnableFunc(func(ctx context.Context) error { return pollDepth(ctx, st, rmetrics) }),
	} {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("routes", func(*http.Request) error {
		select {
		case <-routed:
			return nil
		default:
			return errors.New("route table not built yet")
		}
	}); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("store", storeReachable(st)); err != nil {
		return err
	}
	log.Info("starting receiver", "version", version.Get().Version, "bind", o.bindAddr, "store", store.Redact(o.storeDSN),
		"promise", promise.String(), "watchNamespaces", o.namespaces, "receiverNamespace", o.receiverNS)
	return mgr.Start(ctx)
}

// storeReachable is ready while the store answers: a replica that cannot commit would answer
// every delivery 503, so the Service should send deliveries to one that can. Liveness does not
// depend on it: restarting does not bring a database back.
func storeReachable(st store.Store) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		if err := st.Ping(ctx); err != nil {
			return fmt.Errorf("store unreachable: %w", err)
		}
		return nil
	}
}

// httpServer runs srv until ctx ends, then shuts it down gracefully: requests in flight finish
// (their claims commit) before the process exits. It listens only once ready returns true.
func httpServer(srv *http.Server, grace time.Duration, ready func(context.Context) bool) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		if !ready(ctx) {
			return nil
		}
		errc := make(chan error, 1)
		go func() { errc <- srv.ListenAndServe() }()
		select {
		case err := <-errc:
			return fmt.Errorf("serving deliveries on %s: %w", srv.Addr, err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		return srv.Shutdown(sctx)
	})
}

// sweep removes ledger entries older than the longest dedupe window or payload retention in
// force, and drops the payloads each route keeps for a shorter time (spec.delivery.retention).
func sweep(ctx context.Context, st store.Store, routes *receiver.Routes, o options, log logr.Logger) error {
	t := time.NewTicker(o.sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		retentions, longest := routes.Retentions()
		window := max(o.retention, routes.MaxDedupeWindow(), longest)
		n, err := st.Sweep(ctx, time.Now().Add(-window))
		if err != nil {
			log.Error(err, "sweeping the ledger")
			continue
		}
		if n > 0 {
			log.Info("swept expired ledger entries", "events", n, "window", window.String())
		}
		if l, ok := st.(store.Ledger); ok {
			receiver.ForgetPayloads(ctx, l, retentions, time.Now(), log)
		}
	}
}

// depthPollEvery is how often the queue depth and each sink's backlog are read from the store;
// a poll that takes long (a SQLite ledger with a backlog of a million events) is spaced so that
// polling takes at most 1/depthPollShare of the time.
const (
	depthPollEvery = 5 * time.Second
	depthPollShare = 20
)

func pollDepth(ctx context.Context, st store.Store, m *receiver.Metrics) error {
	for {
		start := time.Now()
		_ = m.PollStore(ctx, st, start) // a failed poll keeps the last figures until the next
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(max(depthPollEvery, depthPollShare*time.Since(start))):
		}
	}
}
