// Command receiver is Hookwarden's bundled webhook receiver.
//
//	receiver [serve] [flags]              serve deliveries (the default)
//	receiver dead-letters --store DSN     list dead-lettered deliveries
//	receiver replay --store DSN ID...     send dead letters to the sink again
//
// It learns routes and signing secrets by watching WebhookSubscriptions and the labelled
// signing Secrets the manager writes, verifies each delivery with its provider's scheme,
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
	"text/tabwriter"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hookwarden/hookwarden/internal/receiver/store"
)

func main() {
	args := os.Args[1:]
	cmd := "serve"
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
	case "help":
		fmt.Fprintln(os.Stderr, "usage: receiver [serve|dead-letters|replay|help] [flags]; receiver <command> -h for flags")
	default:
		err = fmt.Errorf("unknown command %q (serve, dead-letters, replay, help)", cmd)
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
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	return run(ctrl.SetupSignalHandler(), o)
}

// openStore adds --store to fs, parses args and opens the store.
func openStore(fs *flag.FlagSet, args []string) (*store.SQL, error) {
	dsn := fs.String("store", defaultStore, "store DSN: sqlite:///path/file.db or postgres://...")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return store.Open(ctx, *dsn)
}

func deadLetters(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("dead-letters", flag.ContinueOnError)
	limit := fs.Int("limit", 100, "most dead letters to list")
	s, err := openStore(fs, args)
	if err != nil {
		return err
	}
	defer s.Close()
	jobs, err := s.DeadLetters(context.Background(), *limit)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSUBSCRIPTION\tEVENT\tTYPE\tATTEMPTS\tRECEIVED\tLAST ERROR")
	for _, j := range jobs {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Event.Subscription, j.Event.EventID, j.Event.EventType, j.Attempt,
			j.Event.ReceivedAt.UTC().Format(time.RFC3339), j.LastError)
	}
	return w.Flush()
}

func replay(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	s, err := openStore(fs, args)
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
