// Command fakestripe serves the in-process Stripe webhook-endpoint fake
// (providers/stripe/fake) on a TCP address, so demos and scripts can point stripe-go, the
// operator or curl at it without a Stripe account.
//
// Besides the Stripe API it serves two debugging endpoints for scripts:
//
//	GET /_fake/requests          the request log as JSON (account labels, never keys)
//	GET /_fake/endpoints?key=K   account K's endpoints as JSON, secrets included
//	GET /_fake/meter             requests per route, and how many -rate refused
//	POST /_fake/endpoints?key=K  store the JSON endpoint in the body on account K out of band
//	                             (no request logged, no fault); answers what was stored
//	GET /_fake/chaos             what --fault-rate injected so far, by kind
//
// and the event log, its deliveries and the fake's clock (Stripe's retries happen only when
// asked, on that clock):
//
//	POST /_fake/events?key=K     {"type":"invoice.paid","object":{...}}: create an event on
//	                             account K and deliver it to K's subscribed enabled endpoints;
//	                             answers the event with its deliveries
//	GET  /_fake/events?key=K     account K's event log, oldest first, deliveries included
//	GET  /_fake/attempts         every delivery attempt (event, endpoint, attempt, code)
//	POST /_fake/retry            make every retry due on the fake's clock; answers the attempts
//	GET  /_fake/clock            {"now": the fake's time}
//	POST /_fake/clock            {"advance":"96h"}: move the fake's clock ahead; answers the time
package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/stripe/fake"
)

func main() { fakeapi.Main("fakestripe", run) }

// run serves until ctx is cancelled, then shuts down gracefully. It returns errors instead of
// exiting so that only main decides the exit status (and so tests can call it).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakestripe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:12111", "listen address")
	pageSize := fs.Int("page-size", 0, "cap list pages at this many items (0 = no cap), to exercise pagination")
	maxEndpoints := fs.Int("max-endpoints", fake.DefaultMaxEndpoints, "webhook endpoints allowed per API key")
	meter := fakeapi.MeterFlags(fs)      // Stripe test mode: -rate 25 -latency 20ms
	chaosFlags := fakeapi.ChaosFlags(fs) // a rate limit is Stripe's 429 rate_limit
	apiVersion := fs.String("api-version", fake.DefaultAPIVersion, "the API version events are created in (the account's default)")
	autoDisable := fs.Bool("auto-disable", false, "disable an endpoint whose deliveries failed for Stripe's whole 3-day retry window")
	if help, err := fakeapi.ParseFlags(fs, args); help || err != nil {
		return err
	}

	m := meter()
	chaos, err := chaosFlags()
	if err != nil {
		return err
	}
	opts := []fake.Option{fake.WithPageSize(*pageSize), fake.WithMaxEndpoints(*maxEndpoints), fake.WithChaos(chaos), fake.WithMeter(m), fake.WithAPIVersion(*apiVersion)}
	if *autoDisable {
		opts = append(opts, fake.WithAutoDisable())
	}
	srv := fake.New(opts...)
	return fakeapi.Run(ctx, "fakestripe", *addr, handler(srv, m), stderr, nil)
}

func handler(srv *fake.Server, m *fakeapi.Meter) http.Handler {
	mux := http.NewServeMux()
	fakeapi.HandleDebug(mux, m, srv.Requests, srv.Chaos)
	mux.HandleFunc("GET /_fake/endpoints", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		if key == "" {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "query parameter key (the API key) is required"})
			return
		}
		eps := srv.Endpoints(key)
		if eps == nil {
			eps = []fake.Endpoint{}
		}
		fakeapi.WriteJSON(w, http.StatusOK, eps)
	})
	mux.HandleFunc("POST /_fake/endpoints", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		var ep fake.Endpoint
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&ep); err != nil || key == "" {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "query parameter key (the API key) and a JSON endpoint body are required"})
			return
		}
		fakeapi.WriteJSON(w, http.StatusOK, srv.Seed(key, ep))
	})
	mux.HandleFunc("POST /_fake/events", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		var e emitRequest
		if err := fakeapi.DecodeJSON(r, &e); err != nil || key == "" || e.Type == "" {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `query parameter key (the API key) and a body {"type":T,"object":{...}} are required`})
			return
		}
		fakeapi.WriteJSON(w, http.StatusOK, srv.Emit(key, e.Type, e.Object))
	})
	mux.HandleFunc("GET /_fake/events", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		if key == "" {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "query parameter key (the API key) is required"})
			return
		}
		fakeapi.WriteJSON(w, http.StatusOK, fakeapi.NonNil(srv.Events(key)))
	})
	mux.HandleFunc("GET /_fake/attempts", func(w http.ResponseWriter, r *http.Request) {
		fakeapi.WriteJSON(w, http.StatusOK, fakeapi.NonNil(srv.Attempts()))
	})
	mux.HandleFunc("POST /_fake/retry", func(w http.ResponseWriter, r *http.Request) {
		fakeapi.WriteJSON(w, http.StatusOK, fakeapi.NonNil(srv.RetryDue()))
	})
	fakeapi.ClockRoutes(mux, srv.Now, srv.AdvanceClock)
	mux.Handle("/", srv)
	return mux
}

type emitRequest struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}
