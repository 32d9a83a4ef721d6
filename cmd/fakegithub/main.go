// Command fakegithub serves the fake GitHub webhook API (providers/github/fake) on a TCP
// address, so demos and scripts can point the operator, go-github or curl at it without a
// GitHub account. Point a client at http://ADDR (github.com style) or http://ADDR/api/v3
// (GitHub Enterprise Server style).
//
// Besides the GitHub API it serves an admin API for scripts (tokens travel in bodies, never
// in URLs, and the request log holds only labels):
//
//	POST /_fake/grant        {"token":T,"targets":["repos/o/r","orgs/o"],"read_only":false}
//	GET  /_fake/hooks?target=repos/o/r   the target's hooks as JSON, secrets included
//	POST /_fake/hooks?target=repos/o/r   store the JSON hook in the body out of band (no
//	                         request logged, no fault, no rule enforced); answers what was stored
//	GET  /_fake/chaos        what --fault-rate injected so far, by kind
//	POST /_fake/deliver      {"target":"repos/o/r","hook_id":N,"event":"push","payload":{...}}
//	POST /_fake/emit         {"target":"repos/o/r","event":"push","payload":{...},"ago":"80h"}:
//	                         the event happens on the target, one guid delivered to every
//	                         active hook subscribed to it, logged as delivered "ago" before the
//	                         fake's now (optional); answers the deliveries
//	GET  /_fake/deliveries   every delivery attempted (?target=T&hook_id=N: that hook's delivery
//	                         log, newest first, as GET .../deliveries lists it)
//	GET  /_fake/clock        the fake's time
//	POST /_fake/clock        {"advance":"96h"}: move the fake's clock forward (delivered_at,
//	                         the 3-day redelivery window, rate-limit resets)
//	GET  /_fake/requests     the request log
//	GET  /_fake/meter        requests per route, and how many -rate refused
//	GET  /_fake/stats        the request log summed up (lists, 304s, creates, ...)
//	POST /_fake/reset-requests
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers/github/fake"
)

func main() { fakeapi.Main("fakegithub", run) }

// run serves until ctx is cancelled, then shuts down gracefully. It returns errors instead of
// exiting so that only main decides the exit status (and so tests can call it).
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakegithub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:12121", "listen address")
	pageSize := fs.Int("page-size", 0, "cap list pages at this many hooks (0 = GitHub's per_page, at most 100), to exercise pagination")
	hookCap := fs.Int("hook-cap", fake.DefaultHookCap, "hooks allowed per event on one repository or organization")
	rateLimit := fs.Int("rate-limit", fake.DefaultRateLimit, "requests per token and hour")
	limitStatus := fs.Int("rate-limit-status", http.StatusForbidden, "status of a primary rate-limit refusal (403 or 429)")
	meter := fakeapi.MeterFlags(fs) // -rate: the secondary limit per token, on top of -rate-limit per hour
	window := fs.Duration("redelivery-window", fake.RedeliveryWindow, "how long after its first delivery an event can be redelivered (GitHub Enterprise Server, which a client reaches at /api/v3, keeps 168h)")
	deliveries := fs.Bool("deliveries", true, "ping config.url after a create and on POST .../pings, as GitHub does")
	chaosFlags := fakeapi.ChaosFlags(fs) // a rate limit is GitHub's secondary limit: 429, retry-after 1
	if help, err := fakeapi.ParseFlags(fs, args); help || err != nil {
		return err
	}
	if *limitStatus != http.StatusForbidden && *limitStatus != http.StatusTooManyRequests {
		return fmt.Errorf("-rate-limit-status must be 403 or 429, not %d", *limitStatus)
	}

	chaos, err := chaosFlags()
	if err != nil {
		return err
	}
	clock := &fakeapi.Clock{} // the wall clock, moved ahead by POST /_fake/clock
	opts := []fake.Option{fake.WithClock(clock.Now), fake.WithRedeliveryWindow(*window), fake.WithPageSize(*pageSize), fake.WithHookCap(*hookCap), fake.WithRateLimit(*rateLimit), fake.WithRateLimitStatus(*limitStatus), fake.WithChaos(chaos)}
	if *deliveries {
		opts = append(opts, fake.WithDeliveries(nil))
	}
	m := meter()
	srv := fake.New(append(opts, fake.WithMeter(m))...)
	return fakeapi.Run(ctx, "fakegithub", *addr, handler(srv, m, clock), stderr, srv.WaitDeliveries)
}

type grantRequest struct {
	Token    string   `json:"token"`
	Targets  []string `json:"targets"`
	ReadOnly bool     `json:"read_only"`
}

type emitRequest struct {
	Target  string          `json:"target"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	// Ago backdates the deliveries (a Go duration), for a manager whose clock is the wall clock.
	Ago string `json:"ago"`
}

type deliverRequest struct {
	Target  string          `json:"target"`
	HookID  int64           `json:"hook_id"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
}

//nolint:funlen // the fake's route table, one case per route
func handler(srv *fake.Server, m *fakeapi.Meter, clock *fakeapi.Clock) http.Handler {
	mux := http.NewServeMux()
	fakeapi.HandleDebug(mux, m, srv.Requests, srv.Chaos)
	mux.HandleFunc("POST /_fake/grant", func(w http.ResponseWriter, r *http.Request) {
		var g grantRequest
		if err := fakeapi.DecodeJSON(r, &g); err != nil || g.Token == "" || len(g.Targets) == 0 {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"token":T,"targets":["repos/<owner>/<repo>" or "orgs/<org>", ...]}`})
			return
		}
		for _, t := range g.Targets {
			if !fake.ValidTarget(t) {
				fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "target " + strconv.Quote(t) + " is neither repos/<owner>/<repo> nor orgs/<org>"})
				return
			}
		}
		if g.ReadOnly {
			srv.GrantRead(g.Token, g.Targets...)
		} else {
			srv.Grant(g.Token, g.Targets...)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_fake/hooks", func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.Query().Get("target")
		if !fake.ValidTarget(target) {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "query parameter target (repos/<owner>/<repo> or orgs/<org>) is required"})
			return
		}
		hooks := srv.Hooks(target)
		if hooks == nil {
			hooks = []fake.Hook{}
		}
		fakeapi.WriteJSON(w, http.StatusOK, hooks)
	})
	mux.HandleFunc("POST /_fake/hooks", func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.Query().Get("target")
		var h fake.Hook
		if err := fakeapi.DecodeJSON(r, &h); err != nil || !fake.ValidTarget(target) {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "query parameter target (repos/<owner>/<repo> or orgs/<org>) and a JSON hook body are required"})
			return
		}
		fakeapi.WriteJSON(w, http.StatusOK, srv.Seed(target, h))
	})
	mux.HandleFunc("POST /_fake/deliver", func(w http.ResponseWriter, r *http.Request) {
		var d deliverRequest
		if err := fakeapi.DecodeJSON(r, &d); err != nil || d.Event == "" {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"target":T,"hook_id":N,"event":E,"payload":{...}}`})
			return
		}
		out, err := srv.Deliver(d.Target, d.HookID, d.Event, d.Payload)
		if err != nil {
			fakeapi.WriteJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		fakeapi.WriteJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /_fake/emit", func(w http.ResponseWriter, r *http.Request) {
		var e emitRequest
		if err := fakeapi.DecodeJSON(r, &e); err != nil || e.Event == "" || !fake.ValidTarget(e.Target) {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"target":"repos/<owner>/<repo>" or "orgs/<org>","event":E,"payload":{...}}`})
			return
		}
		var at time.Time
		if e.Ago != "" {
			ago, err := time.ParseDuration(e.Ago)
			if err != nil || ago < 0 {
				fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": `"ago" is a Go duration, not negative ("80h")`})
				return
			}
			at = clock.Now().Add(-ago)
		}
		out, err := srv.EmitAt(at, e.Target, e.Event, e.Payload)
		if err != nil {
			fakeapi.WriteJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		fakeapi.WriteJSON(w, http.StatusOK, fakeapi.NonNil(out))
	})
	mux.HandleFunc("GET /_fake/deliveries", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("target") == "" && q.Get("hook_id") == "" {
			fakeapi.WriteJSON(w, http.StatusOK, fakeapi.NonNil(srv.Deliveries()))
			return
		}
		id, err := strconv.ParseInt(q.Get("hook_id"), 10, 64)
		if err != nil || !fake.ValidTarget(q.Get("target")) {
			fakeapi.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "query parameters target (repos/<owner>/<repo> or orgs/<org>) and hook_id go together"})
			return
		}
		log := srv.DeliveryLog(q.Get("target"), id)
		if log == nil {
			fakeapi.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "no such hook"})
			return
		}
		fakeapi.WriteJSON(w, http.StatusOK, log)
	})
	fakeapi.ClockRoutes(mux, clock.Now, clock.Advance)
	mux.HandleFunc("GET /_fake/stats", func(w http.ResponseWriter, r *http.Request) {
		fakeapi.WriteJSON(w, http.StatusOK, srv.Stats())
	})
	mux.HandleFunc("POST /_fake/reset-requests", func(w http.ResponseWriter, r *http.Request) {
		srv.ResetRequests()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("/", srv)
	return mux
}
