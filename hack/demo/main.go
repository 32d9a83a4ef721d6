// Command demo is the program behind `make demo`: it runs Hookwarden end to end on this machine
// with nothing but Go. It starts a local control plane (envtest: kube-apiserver and etcd), the
// fake Stripe (bin/fakestripe), the fake GitHub (bin/fakegithub), the receiver (bin/receiver)
// and the manager (bin/manager, with --receiver-base-url pointing at the receiver) as real
// processes, and serves a sink and an embedded nats-server with JetStream itself. It applies
// the Stripe and the GitHub samples (provider.apiURL rewritten to the provider's fake,
// delivery.sink.url to the sink, an endpoint.url on the receiver's route to the receiver; the
// first subscription with a sink fans out: delivery.sinks holds its HTTP sink and a NATS
// JetStream sink, filtered to one event type, on a stream the demo creates) and checks what each
// provider holds: one registration per subscription, the signing secret stored; on GitHub also
// the hook's config as GitHub wants it and the ping GitHub sends after a create, answered by
// the receiver and recorded in status. Then it acts as Stripe and as GitHub, sending bursts of signed
// deliveries with duplicates (some concurrent) straight to the receiver, and checks the answers
// (one 202 per event, 200 for each copy), the sink (each event exactly once), the fan-out's
// stream (each event its filter selects exactly once, nothing else), a forgery per provider
// (401) and the receiver's metrics. Then: no new create after a manager restart; the
// receiver stopped while each fake sends events that therefore fail, started again, and the
// missed events recovered (spec.recovery.mode Auto at the next resync, Manual when the
// hookwarden.io/recover-requested-at annotation asks) and at the sink exactly once. Last:
// nothing left after deletion, no secret in a log.
//
//	bin/demo -assets "$(hack/control-plane.sh --print-dir)" -bin bin -samples config/samples,config/samples/github
//
// It prints "DEMO OK" and exits 0 when every check held, or "DEMO FAILED: <what>" and exits 1.
// Every process it started is stopped, and its temp folder removed, on success, failure and
// Ctrl-C alike.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// options are the command-line flags.
type options struct {
	assets       string   // folder with kube-apiserver, etcd and kubectl
	binDir       string   // folder with manager, receiver, fakestripe and fakegithub
	samples      []string // folders with the sample manifests
	crds         string   // folder with the CRD manifests
	readyTimeout time.Duration
	burstEvents  int    // distinct events per subscription in the burst
	burstSeed    uint64 // 0: from the clock
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(2)
	}
	// envtest logs through controller-runtime; the demo prints its own progress instead.
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the demo at once, cleanup or not
	}()
	start := time.Now()
	summary, err := run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nDEMO FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("\nDEMO OK: %s (%s)\n", summary, time.Since(start).Round(time.Second))
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.StringVar(&o.assets, "assets", "", "folder with kube-apiserver, etcd and kubectl (hack/control-plane.sh --print-dir)")
	fs.StringVar(&o.binDir, "bin", "bin", "folder with the manager, receiver, fakestripe and fakegithub binaries")
	samples := fs.String("samples", filepath.Join("config", "samples")+","+filepath.Join("config", "samples", "github"),
		"comma-separated folders with the sample manifests (their subfolders are not read)")
	fs.StringVar(&o.crds, "crds", filepath.Join("config", "crd", "bases"), "folder with the CRD manifests")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 90*time.Second, "how long the samples may take to become Ready")
	fs.IntVar(&o.burstEvents, "burst-events", 40, "distinct events sent to the receiver per subscription")
	fs.Uint64Var(&o.burstSeed, "burst-seed", 0, "seed of the burst's duplicates and order (0: from the clock; each run prints its seed)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, dir := range strings.Split(*samples, ",") {
		if dir = strings.TrimSpace(dir); dir != "" {
			o.samples = append(o.samples, dir)
		}
	}
	if len(o.samples) == 0 {
		return o, errors.New("-samples names no folder")
	}
	if o.burstEvents < 1 {
		return o, errors.New("-burst-events must be at least 1")
	}
	if o.assets == "" {
		return o, errors.New("-assets is required (the folder hack/control-plane.sh --print-dir prints)")
	}
	return o, nil
}

// run performs the demo and returns a one-line summary. Whatever happens, it stops what it
// started before returning.
func run(ctx context.Context, o options, out io.Writer) (summary string, err error) {
	d := &demo{opts: o, out: out, providers: []provider{newStripeProvider(), newGitHubProvider()}}
	defer func() {
		if err != nil && ctx.Err() == nil {
			d.showLogs(20)
		}
		d.step("cleaning up")
		if cerr := d.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()
	if err := d.checkInputs(); err != nil {
		return "", err
	}
	steps := []func(context.Context) error{
		d.startControlPlane,
		d.startFakes,
		d.startSinkStep,
		d.startNATSStep,
		d.startReceiver,
		d.startManagerStep,
		d.applySamples,
		d.waitAllReady,
		d.showProviders,
		d.burst,
		d.restartManager,
		d.recoverMissed,
		d.deleteSamples,
		d.checkLogsForSecrets,
	}
	for _, s := range steps {
		if err := s(ctx); err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("interrupted by a signal (%v)", err)
			}
			return "", err
		}
	}
	return d.summary(), nil
}
