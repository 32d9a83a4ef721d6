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
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/controllers"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

type options struct {
	metricsAddr    string
	probeAddr      string
	leaderElect    bool
	leaderElectNS  string
	clusterName    string
	listTTL        time.Duration
	providerQPS    float64
	providerBurst  int
	requestTimeout time.Duration
	concurrency    int
	receiverBase   string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "validate-profile" {
		os.Exit(validateProfiles(os.Args[2:], os.Stdout, os.Stderr))
	}
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the metrics endpoint binds to; \"0\" disables it")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health probe endpoint binds to")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so that only one replica talks to providers")
	flag.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	flag.StringVar(&o.clusterName, "cluster-name", "default", "name of this cluster in ownership markers; clusters sharing a provider account must use different names")
	flag.DurationVar(&o.listTTL, "list-ttl", 30*time.Second, "longest time one provider list serves the other subscriptions on the same account")
	flag.Float64Var(&o.providerQPS, "provider-qps", 10, "requests per second to one provider account, shared by all its subscriptions")
	flag.IntVar(&o.providerBurst, "provider-burst", 5, "burst of requests to one provider account")
	flag.DurationVar(&o.requestTimeout, "provider-timeout", 20*time.Second, "timeout of one provider request")
	flag.StringVar(&o.receiverBase, "receiver-base-url", "", "public base URL of the bundled receiver (e.g. https://hooks.example.com); subscriptions with spec.endpoint.receiver register <base>/hooks/<namespace>/<name>")
	flag.IntVar(&o.concurrency, "max-concurrent-reconciles", 4, "subscriptions reconciled in parallel (one account is always serialized)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
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

func run(ctx context.Context, o options) error {
	if o.clusterName == "" {
		return errors.New("--cluster-name must not be empty")
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
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "hookwarden-manager.hookwarden.io",
		LeaderElectionNamespace:       o.leaderElectNS,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	registry := providers.Registry{
		string(hookv1.ProviderStripe): stripe.Factory(),
		string(hookv1.ProviderGitHub): github.Factory(),
		string(hookv1.ProviderREST):   rest.Factory(),
	}
	r := &controllers.Reconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("hookwarden-manager"),
		Accounts:                controllers.NewAccounts(registry, controllers.AccountOptions{QPS: o.providerQPS, Burst: o.providerBurst, RequestTimeout: o.requestTimeout}),
		ClusterName:             o.clusterName,
		ListTTL:                 o.listTTL,
		ReceiverBaseURL:         o.receiverBase,
		MaxConcurrentReconciles: o.concurrency,
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "cluster", o.clusterName, "leaderElection", o.leaderElect)
	return mgr.Start(ctx)
}
