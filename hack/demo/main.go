// Command demo is the program behind `make demo`: it runs Hookwarden end to end on this machine
// with nothing but Go. It starts a local control plane (envtest: kube-apiserver and etcd), the
// fake Stripe (bin/fakestripe), the receiver (bin/receiver) and the manager (bin/manager, with
// --receiver-base-url pointing at the receiver) as real processes, and serves a sink itself. It
// applies the samples (provider.apiURL and delivery.sink.url rewritten to the fake and the sink)
// and checks what the provider holds at each step: one endpoint per subscription, the signing
// secret stored. Then it acts as Stripe, sending bursts of signed deliveries with duplicates
// (some concurrent) straight to the receiver, and checks the answers (one 202 per event, 200 for
// each copy), the sink (each event exactly once), a forgery (401) and the receiver's metrics.
// Last: no new create after a manager restart, nothing left after deletion, no secret in a log.
//
//	bin/demo -assets "$(hack/control-plane.sh --print-dir)" -bin bin -samples config/samples
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
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// options are the command-line flags.
type options struct {
	assets       string // folder with kube-apiserver, etcd and kubectl
	binDir       string // folder with manager, receiver and fakestripe
	samples      string // folder with the sample manifests
	crds         string // folder with the CRD manifests
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
	fs.StringVar(&o.binDir, "bin", "bin", "folder with the manager, receiver and fakestripe binaries")
	fs.StringVar(&o.samples, "samples", filepath.Join("config", "samples"), "folder with the sample manifests")
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
	d := &demo{opts: o, out: out}
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
		d.startFakeStripe,
		d.startSinkStep,
		d.startReceiver,
		d.startManagerStep,
		d.applySamples,
		d.waitAllReady,
		d.showProvider,
		d.burst,
		d.restartManager,
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
