package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// receiverRig is a real receiver for the admin commands' tests: the handler on one Stripe route
// (its first secret signs what post sends), the ledger st, the delivery pool, and the admin API
// on a metrics server that authenticates and authorizes as cmd/receiver's --metrics-secure does
// (TokenReview, SubjectAccessReview against envtest, the ClusterRoles of config/rbac).
type receiverRig struct {
	hooks  string // the handler's base URL
	addr   string // the admin API's host:port (https)
	route  receiver.Route
	routes *receiver.Routes
}

// newReceiverRig serves route from st until ctx ends; it closes st when the test ends.
// openStore opens a store of kind ("sqlite": a file of the test's, "redis": a durable Redis
// of its own).
func openStore(ctx context.Context, t *testing.T, g *WithT, kind string) store.Store {
	dsn := "sqlite://" + storetest.SQLitePath(t)
	if kind == "redis" {
		dsn = storetest.StartRedis(t, storetest.DurableRedis()...).URL()
	}
	st, err := store.Open(ctx, dsn)
	g.Expect(err).NotTo(HaveOccurred())
	return st
}

func newReceiverRig(ctx context.Context, t *testing.T, g *WithT, st store.Store, route receiver.Route) *receiverRig {
	batcher := store.NewBatcher(st, store.BatcherOptions{})
	t.Cleanup(func() { batcher.Close(); st.Close() })
	routes := receiver.NewRoutes()
	routes.Set(route)
	h := &receiver.Handler{Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()}, Claims: batcher,
		MaxBody: 1 << 16, ClaimTimeout: 5 * time.Second, Log: logr.Discard(), Now: time.Now}
	hooks := httptest.NewServer(h.Mux())
	t.Cleanup(hooks.Close)
	pool := deliver.New(st, deliver.NewSender(deliver.SenderOptions{Timeout: 5 * time.Second}), routes.Resolve,
		deliver.Options{Workers: 2, PollInterval: 20 * time.Millisecond, Wake: batcher.Committed(), Logger: logr.Discard()})
	go func() { _ = pool.Run(ctx) }()

	admin := &receiver.Admin{Store: st, Routes: routes, Now: time.Now}
	addr := freeAddr(t)
	httpClient, err := rest.HTTPClientFor(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := metricsserver.NewServer(metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization,
		ExtraHandlers: admin.Handlers()}, env.Config, httpClient)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Start(ctx) }()
	return &receiverRig{hooks: hooks.URL, addr: addr, route: route, routes: routes}
}

// post delivers a Stripe invoice.paid event id to the route, signed with its secret, and
// returns the answer's status.
func (r *receiverRig) post(g *WithT, id string) int {
	body := []byte(`{"id":"` + id + `","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{}}}`)
	req, _ := http.NewRequest(http.MethodPost, r.hooks+"/hooks/"+r.route.Namespace+"/"+r.route.Name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(stripe.SignatureHeader, stripe.SignHeader(string(r.route.Secrets[0]), time.Now(), body))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	return resp.StatusCode
}

// command runs the admin command name (deadletters, events) against the rig with token.
func (r *receiverRig) command(t *testing.T, name, token string, args ...string) (int, string, string) {
	return run(t, nil, append(append([]string{name}, args...), "--receiver", "https://"+r.addr, "--receiver-token-file", token, "--receiver-insecure-skip-tls-verify")...)
}
