package fakeapi

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

// RunFunc is a fake binary's body: it serves until ctx ends and returns errors instead of
// exiting, so that only main decides the exit status and tests can call it.
type RunFunc func(ctx context.Context, args []string, stderr io.Writer) error

// Main runs a fake binary until SIGINT or SIGTERM; an error is printed after its name and
// exits 1.
func Main(name string, run RunFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// ParseFlags parses a fake binary's arguments: -h prints the usage and is not an error (help
// is true, the caller returns nil), a positional argument is.
func ParseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return false, nil
}

// HandleDebug serves the debugging endpoints every fake binary has:
//
//	GET /_fake/requests   the request log as JSON (labels, never credentials)
//	GET /_fake/meter      requests per route, and how many -rate refused
//	GET /_fake/chaos      what --fault-rate injected so far, by kind
func HandleDebug[R any](mux *http.ServeMux, m *Meter, requests func() []R, chaos func() ChaosCounts) {
	mux.HandleFunc("GET /_fake/requests", func(w http.ResponseWriter, r *http.Request) {
		rs := requests()
		if rs == nil {
			rs = []R{}
		}
		WriteJSON(w, http.StatusOK, rs)
	})
	mux.HandleFunc("GET /_fake/meter", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, m.Counts())
	})
	mux.HandleFunc("GET /_fake/chaos", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, chaos())
	})
}
