// Command receiver is Hookwarden's bundled webhook receiver.
//
//	receiver [serve] [flags]              serve deliveries (the default)
//	receiver dead-letters --store DSN     list dead-lettered deliveries
//	receiver replay --store DSN ID...     send dead letters to the sink again
//	receiver probe URL                    check that the receiver at URL serves deliveries (helm test)
//	receiver --version                    print the version
//
// It learns routes and signing secrets by watching WebhookSubscriptions and the route Secrets
// the manager writes in the receiver's own namespace (the only Secrets it reads), verifies each delivery with its provider's scheme,
// records it in the durable store (acknowledging only after the commit) and delivers each
// event to spec.delivery.sink once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hookwarden/hookwarden/internal/version"
	"github.com/hookwarden/hookwarden/receiver/store"
)

func main() {
	args := os.Args[1:]
	cmd := "serve"
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		args = []string{"version"}
	}
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(args)
	case "dead-letters":
		err = deadLetters(args, os.Stdout)
	case "replay":
		err = replay(args, os.Stdout)
	case "probe":
		err = probe(args, os.Stdout)
	case "version":
		fmt.Println("receiver", version.Get())
	case "help":
		fmt.Fprintln(os.Stderr, "usage: receiver [serve|dead-letters|replay|probe|version|help] [flags]; receiver <command> -h for flags")
	default:
		err = fmt.Errorf("unknown command %q (serve, dead-letters, replay, probe, version, help)", cmd)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "receiver:", err)
		}
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o := defaultOptions()
	o.bind(fs)
	// --kubeconfig, as the manager (controller-runtime) takes it; else KUBECONFIG, in-cluster.
	config.RegisterFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Production mode samples repeated messages (the first 100 per second, then every 100th),
	// which thins the store path's per-delivery errors in an outage; requests_total counts
	// each one. --zap-devel or --zap-log-level=2 turns sampling off (docs/receiver.md).
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	return run(ctrl.SetupSignalHandler(), o)
}

// envStorePassword names the variable that may hold the store's password (Redis, PostgreSQL),
// so that it needs to be neither in the DSN nor on the command line.
const envStorePassword = "HOOKWARDEN_STORE_PASSWORD"

func bindStorePassword(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "store-password-file", *path, "file holding the store's password (Redis, PostgreSQL; overrides $"+envStorePassword+" and the DSN's)")
}

// openStore opens the store at dsn with its password from passwordFile, else from
// $HOOKWARDEN_STORE_PASSWORD, else the DSN's. A Redis that cannot keep the requested promise
// is refused with the settings to change or the flag that accepts it.
func openStore(ctx context.Context, dsn, passwordFile string, opts ...store.Option) (store.Store, error) {
	password := os.Getenv(envStorePassword)
	if passwordFile != "" {
		b, err := os.ReadFile(passwordFile)
		if err != nil {
			return nil, fmt.Errorf("--store-password-file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	if password != "" {
		opts = append(opts, store.WithPassword(password))
	}
	st, err := store.Open(ctx, dsn, opts...)
	var perr *store.PromiseError
	if errors.As(err, &perr) {
		return nil, fmt.Errorf("%w\nFix those settings on the server, or accept the weaker promise with --store-promise=%s "+
			"(docs/receiver.md, \"Redis\", explains what each promise risks)", err, perr.Have)
	}
	return st, err
}

// storeKind names the store of dsn for metrics.
func storeKind(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "postgres"):
		return "postgres"
	case strings.HasPrefix(dsn, "redis"):
		return "redis"
	}
	return "sqlite"
}

// promiseReasons says why a store's promise is weaker than strict.
func promiseReasons(st store.Store) []string {
	if r, ok := st.(interface{ PromiseReasons() []string }); ok {
		return r.PromiseReasons()
	}
	return nil
}

// openAdminStore adds --store and the password flag to fs, parses args and opens the store for
// a command that lists or replays dead letters (it refuses no promise: it acknowledges nothing).
func openAdminStore(fs *flag.FlagSet, args []string) (store.Store, error) {
	dsn := fs.String("store", defaultStore, "store DSN: sqlite:///path/file.db, postgres://... or redis://...")
	var passwordFile string
	bindStorePassword(fs, &passwordFile)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return openStore(ctx, *dsn, passwordFile, store.WithMinPromise(store.PromiseBestEffort))
}

func deadLetters(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("dead-letters", flag.ContinueOnError)
	limit := fs.Int("limit", 100, "most dead letters to list")
	s, err := openAdminStore(fs, args)
	if err != nil {
		return err
	}
	defer s.Close()
	jobs, err := s.DeadLetters(context.Background(), *limit)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSUBSCRIPTION\tSINK\tEVENT\tTYPE\tATTEMPTS\tRECEIVED\tLAST ERROR")
	for _, j := range jobs {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Event.Subscription, j.Sink, j.Event.EventID, j.Event.EventType, j.Attempt,
			j.Event.ReceivedAt.UTC().Format(time.RFC3339), j.LastError)
	}
	return w.Flush()
}

func replay(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	s, err := openAdminStore(fs, args)
	if err != nil {
		return err
	}
	defer s.Close()
	if fs.NArg() == 0 {
		return errors.New("replay needs the ids of dead letters (see: receiver dead-letters)")
	}
	for _, a := range fs.Args() {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return fmt.Errorf("dead letter id %q: %w", a, err)
		}
		if err := s.Replay(context.Background(), id, time.Now()); err != nil {
			return fmt.Errorf("replaying %d: %w", id, err)
		}
		fmt.Fprintf(out, "replayed %d: a running receiver delivers it within its poll interval\n", id)
	}
	return nil
}
