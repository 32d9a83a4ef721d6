package github_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/providerstest"
)

const appNumber = 123456

var appKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var out [2]*rsa.PrivateKey
	for i := range out {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		out[i] = k
	}
	return out
})

func pkcs1(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

// appEnv is the fake GitHub with one App (events push and pull_request) behind the check of
// GitHub's description of the App routes, and the headers every request carried.
type appEnv struct {
	srv      *fake.Server
	base     string
	hookID   int64
	contract *providerstest.Contract
	mu       sync.Mutex
	auth     []string
}

// GitHub's REST description of the App webhook routes (apps/get-webhook-config-for-app,
// apps/update-webhook-config-for-app, apps/get-authenticated; @octokit/openapi 23.0.2, as
// REST-PROVIDERS-2 §1 reads it), transcribed: webhook-config (url, content_type, secret,
// insecure_ssl a string or a number), the App's events, and basic-error for refusals. The
// delivery routes share the repository hooks' renderer, which openapitest checks.
func appSchemas() (config, app, basicError *openapi3.Schema) {
	str := openapi3.NewStringSchema
	insecure := &openapi3.Schema{OneOf: openapi3.SchemaRefs{openapi3.NewSchemaRef("", str()), openapi3.NewSchemaRef("", openapi3.NewFloat64Schema())}}
	config = openapi3.NewObjectSchema().WithProperty("url", str().WithFormat("uri")).WithProperty("content_type", str()).
		WithProperty("secret", str()).WithProperty("insecure_ssl", insecure)
	app = openapi3.NewObjectSchema().WithProperty("id", openapi3.NewIntegerSchema()).WithProperty("events", openapi3.NewArraySchema().WithItems(str())).
		WithRequired([]string{"id", "events"})
	basicError = openapi3.NewObjectSchema().WithProperty("message", str()).WithProperty("documentation_url", str()).WithRequired([]string{"message"})
	return config, app, basicError
}

func appContract(next http.Handler) *providerstest.Contract {
	config, app, basicError := appSchemas()
	return providerstest.NewContract(next, func(x providerstest.Exchange) (string, string) {
		p, code := x.Request.URL.Path, x.Answer.Code
		var op string
		var schema *openapi3.Schema
		switch {
		case p == "/app/hook/config" && x.Request.Method == http.MethodGet:
			op, schema = "get-webhook-config-for-app", config
		case p == "/app/hook/config" && x.Request.Method == http.MethodPatch:
			op, schema = "update-webhook-config-for-app", config
		case p == "/app" && x.Request.Method == http.MethodGet:
			op, schema = "get-authenticated", app
		default:
			return "", ""
		}
		if code != http.StatusOK {
			schema = basicError
		}
		v, err := providerstest.DecodeJSON(x.Answer.Body.Bytes())
		if err != nil {
			return op, "the answer is not JSON"
		}
		if err := schema.VisitJSON(v, openapi3.EnableFormatValidation()); err != nil {
			return op, err.Error()
		}
		return op, ""
	})
}

func newAppEnv(t *testing.T, opts ...fake.Option) *appEnv {
	t.Helper()
	e := &appEnv{srv: fake.New(opts...)}
	e.hookID = e.srv.AddApp(appNumber, "Iv23liAppClient", &appKeys()[0].PublicKey, "push", "pull_request")
	e.contract = appContract(e.srv)
	base, stop := fakeapi.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.auth = append(e.auth, r.Header.Get("Authorization"))
		e.mu.Unlock()
		e.contract.ServeHTTP(w, r)
	}))
	t.Cleanup(stop)
	t.Cleanup(func() { e.contract.Result(t) })
	e.base = base
	return e
}

func (e *appEnv) client(t *testing.T, target, key string, now func() time.Time) providers.Client {
	t.Helper()
	c, err := github.Factory().New(providers.Config{APIURL: e.base, Target: target, Credential: key, Now: now, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// claims decodes a JWT's claims (the fake checked its signature).
func claims(t *testing.T, authorization string) map[string]any {
	t.Helper()
	tok, ok := strings.CutPrefix(authorization, "Bearer ")
	parts := strings.Split(tok, ".")
	if !ok || len(parts) != 3 {
		t.Fatalf("Authorization %q is not a bearer JWT", authorization)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	if err != nil || json.Unmarshal(b, &c) != nil {
		t.Fatalf("claims do not decode: %v", err)
	}
	return c
}

func TestAppWebhookLifeCycle(t *testing.T) {
	ctx := context.Background()
	e := newAppEnv(t)
	start := time.Now()
	c := e.client(t, fmt.Sprintf("app/%d", appNumber), pkcs1(appKeys()[0]), nil)
	caps := c.Capabilities()
	if caps.Markers || caps.Secret != providers.SecretClientChosen || !caps.UpdateNeedsSecret || caps.ReadOnly != providers.FieldEvents || caps.Recovery.Mode != providers.RecoveryRedeliver {
		t.Fatalf("capabilities = %+v", caps)
	}
	if _, ok := c.(providers.Pinger); ok {
		t.Error("the App client pings; an App's webhook has no ping route")
	}
	if regs, err := c.List(ctx); err != nil || len(regs) != 0 {
		t.Fatalf("List of an App without a webhook URL = %+v, %v; want none", regs, err)
	}
	d := providers.Desired{URL: "https://hooks.example.com/app", Events: []string{"push"}, Secret: "app-secret-1"}
	reg, err := c.Create(ctx, d, "")
	if err != nil {
		t.Fatal(err)
	}
	h := e.srv.AppHook(appNumber)
	if reg.ID != github.AppHookID || h.Config.URL != d.URL || h.Config.Secret != "app-secret-1" || h.Config.ContentType != "json" ||
		!slices.Equal(reg.Events, []string{"push", "pull_request"}) || len(reg.Misconfigured) != 0 {
		t.Fatalf("create = %+v; stored %+v; want the URL and secret set, json, the App's own events", reg, h)
	}

	// Events are the App's settings': an update never writes them.
	d.Events, d.Secret = []string{"issues"}, "app-secret-2"
	if u, err := c.Update(ctx, github.AppHookID, d); err != nil || !slices.Equal(u.Events, []string{"push", "pull_request"}) {
		t.Fatalf("Update = %+v, %v; want the App's events read back", u, err)
	}
	if h := e.srv.AppHook(appNumber); h.Config.Secret != "app-secret-2" || !slices.Equal(h.Events, []string{"push", "pull_request"}) {
		t.Errorf("after update %+v; want the new secret and the App's events", h)
	}
	e.srv.SetAppEvents(appNumber, "push")
	if regs, err := c.List(ctx); err != nil || len(regs) != 1 || !slices.Equal(regs[0].Events, []string{"push"}) {
		t.Errorf("List after the App's settings changed = %+v, %v", regs, err)
	}

	// Someone set the URL by hand: a create does not overwrite it.
	e.srv.Edit(fake.AppTarget(appNumber), e.hookID, func(h *fake.Hook) { h.Config.URL = "https://elsewhere.example.com/hook" })
	if _, err := c.Create(ctx, d, ""); providers.KindOf(err) != providers.AlreadyExists {
		t.Errorf("Create over a URL set by hand = %v; want AlreadyExists", err)
	}
	if e.srv.AppHook(appNumber).Config.URL != "https://elsewhere.example.com/hook" {
		t.Error("the URL set by hand was overwritten")
	}
	if err := c.Delete(ctx, github.AppHookID); providers.KindOf(err) != providers.Permanent {
		t.Errorf("Delete = %v; want a Permanent refusal", err)
	}
	if _, err := c.Update(ctx, "42", d); providers.KindOf(err) != providers.Permanent {
		t.Errorf("Update of id 42 = %v; want a refusal before any request", err)
	}

	// Every request carried one JWT: RS256, iss the App ID as a number, iat a minute back, exp
	// nine minutes ahead (GitHub: no more than ten).
	e.mu.Lock()
	auth := slices.Clone(e.auth)
	e.mu.Unlock()
	if distinct := slices.Compact(slices.Clone(auth)); len(distinct) != 1 {
		t.Errorf("%d distinct tokens over %d requests; want one, reused", len(distinct), len(auth))
	}
	cl := claims(t, auth[0])
	iat, exp := time.Unix(int64(cl["iat"].(float64)), 0), time.Unix(int64(cl["exp"].(float64)), 0)
	if cl["iss"] != float64(appNumber) || exp.Sub(iat) != 10*time.Minute || iat.After(start.Add(-59*time.Second)) || iat.Before(start.Add(-62*time.Second)) {
		t.Errorf("claims %v; want iss %d, iat a minute back, exp nine minutes ahead", cl, appNumber)
	}
	seen := e.contract.Result(t)
	for _, want := range []string{"get-webhook-config-for-app 200", "update-webhook-config-for-app 200", "get-authenticated 200"} {
		if seen[want] == 0 {
			t.Errorf("no %q answer was checked (checked %v)", want, seen)
		}
	}
	// The client ID works as iss too, as a string.
	byClient := e.client(t, "app/Iv23liAppClient", pkcs1(appKeys()[0]), nil)
	if _, err := byClient.List(ctx); err != nil {
		t.Errorf("List by client ID = %v", err)
	}
}

func TestAppWebhookBadInput(t *testing.T) {
	ctx := context.Background()
	e := newAppEnv(t)
	target := fmt.Sprintf("app/%d", appNumber)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(appKeys()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client(t, target, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})), nil).List(ctx); err != nil {
		t.Errorf("a PKCS#8 key = %v", err)
	}
	for _, tc := range []struct{ reason, target, key, want string }{
		{"a key that is not PEM", target, "not a key", "not PEM"},
		{"PEM that is no RSA key", target, "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n", "does not parse"},
		{"an App id that is neither digits nor a client ID", "app/my-app", pkcs1(appKeys()[0]), "app/<App ID>"},
	} {
		before := len(e.srv.Requests())
		_, err := github.Factory().New(providers.Config{APIURL: e.base, Target: tc.target, Credential: tc.key})
		if providers.KindOf(err) != providers.Permanent || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "BEGIN") {
			t.Errorf("%s: New = %v; want Permanent naming %q, never the key", tc.reason, err, tc.want)
		}
		if len(e.srv.Requests()) != before {
			t.Errorf("%s: a request was sent", tc.reason)
		}
	}
	for _, tc := range []struct {
		reason string
		key    *rsa.PrivateKey
		skew   time.Duration
		want   string
	}{
		{"the key of another App", appKeys()[1], 0, "could not be decoded"},
		{"a clock 15 minutes behind GitHub's", appKeys()[0], -15 * time.Minute, "'exp'"},
		{"a clock 5 minutes ahead of GitHub's", appKeys()[0], 5 * time.Minute, "'iat'"},
	} {
		now := func() time.Time { return time.Now().Add(tc.skew) }
		_, err := e.client(t, target, pkcs1(tc.key), now).List(ctx)
		if providers.KindOf(err) != providers.Unauthorized || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "clock") {
			t.Errorf("%s: List = %v; want Unauthorized with GitHub's words (%q) and what to check", tc.reason, err, tc.want)
		}
	}
}

// TestAppWebhookRecovery: the App's delivery log is read and redelivered as repository hooks'
// are, under /app/hook/deliveries.
func TestAppWebhookRecovery(t *testing.T) {
	ctx := context.Background()
	var down sync.Map
	var got []http.Header
	var mu sync.Mutex
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		if _, ok := down.Load("down"); ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(rv.Close)
	e := newAppEnv(t, fake.WithDeliveries(rv.Client()))
	c := e.client(t, fmt.Sprintf("app/%d", appNumber), pkcs1(appKeys()[0]), nil)
	d := providers.Desired{URL: rv.URL + "/hooks/app", Events: []string{"push"}, Secret: "app-secret"}
	reg, err := c.Create(ctx, d, "")
	if err != nil {
		t.Fatal(err)
	}
	down.Store("down", true)
	since := time.Now().Add(-time.Minute)
	failed, err := e.srv.Deliver(fake.AppTarget(appNumber), e.hookID, "push", []byte(`{"ref":"refs/heads/main"}`))
	if err != nil || failed.Code != http.StatusServiceUnavailable {
		t.Fatalf("Deliver = %+v, %v", failed, err)
	}
	down.Delete("down")
	page, err := c.(providers.Recoverer).Missed(ctx, reg, []string{"push"}, since, 10)
	if err != nil || len(page.Missed) != 1 || page.Missed[0].ID != failed.GUID {
		t.Fatalf("Missed = %+v, %v; want the failed push", page, err)
	}
	if err := c.(providers.Recoverer).Redeliver(ctx, reg, page.Missed[0]); err != nil {
		t.Fatal(err)
	}
	e.srv.WaitDeliveries()
	mu.Lock()
	last := got[len(got)-1]
	mu.Unlock()
	v, err := github.NewVerifier().Verify(providers.Delivery{Header: last, Body: []byte(`{"ref":"refs/heads/main"}`), Now: time.Now()}, [][]byte{[]byte("app-secret")})
	if err != nil || v.EventID != failed.GUID || last.Get("X-GitHub-Hook-Installation-Target-Type") != "integration" {
		t.Errorf("the redelivery: %+v, %v, target type %q; want the same guid, verified, from an integration", v, err, last.Get("X-GitHub-Hook-Installation-Target-Type"))
	}
}

// TestAppWebhookRequestsPerRound records what a first reconcile of an App's webhook sends (the
// list finds no URL; the create reads the config, patches it, reads the App's events) and what
// a steady resync sends (the config and the App's events).
func TestAppWebhookRequestsPerRound(t *testing.T) {
	ctx := context.Background()
	e := newAppEnv(t)
	c := e.client(t, fmt.Sprintf("app/%d", appNumber), pkcs1(appKeys()[0]), nil)
	round := func(create bool) []string {
		e.srv.ResetRequests()
		if _, err := c.List(ctx); err != nil {
			t.Fatal(err)
		}
		if create {
			if _, err := c.Create(ctx, providers.Desired{URL: "https://hooks.example.com/app", Events: []string{"push"}, Secret: "s"}, ""); err != nil {
				t.Fatal(err)
			}
		}
		var out []string
		for _, r := range e.srv.Requests() {
			out = append(out, fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Status))
		}
		return out
	}
	first, steady := round(true), round(false)
	wantFirst := []string{"GET /app/hook/config 200", "GET /app/hook/config 200", "PATCH /app/hook/config 200", "GET /app 200"}
	wantSteady := []string{"GET /app/hook/config 200", "GET /app 200"}
	if !slices.Equal(first, wantFirst) || !slices.Equal(steady, wantSteady) {
		t.Errorf("first %v, steady %v; want %v and %v", first, steady, wantFirst, wantSteady)
	}
	t.Logf("REPORT github app: first reconcile %v; steady resync %v", first, steady)
}
