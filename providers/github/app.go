package github

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/hookwarden/hookwarden/providers"
)

// A GitHub App has exactly one webhook, part of the App itself (PROVIDERS-2 §1; GitHub's REST
// description, apps/*-webhook-*): GET and PATCH /app/hook/config, the delivery log under
// /app/hook/deliveries, all authenticated as the App with a JSON web token it signs (RS256)
// with its private key. There is no create, list or delete, and the events are set in the
// App's settings only.

// AppHookID is the id of a GitHub App's webhook, which has none of its own.
const AppHookID = "app"

// JWT lifetimes (docs: "Generating a JSON Web Token for a GitHub App"): iat 60 seconds in the
// past, against clock drift; exp no more than 10 minutes ahead, here 9, so a clock up to a minute
// ahead of GitHub's is still within its limit. A token is reused until a minute before exp.
const (
	jwtBackdate = 60 * time.Second
	jwtLifetime = 9 * time.Minute
	jwtRenew    = time.Minute
)

// appID is an App's numeric id, or its client ID (Iv1.…, Iv23…), which GitHub takes as iss too.
var appID = regexp.MustCompile(`^([1-9][0-9]{0,19}|Iv[0-9A-Za-z._-]{1,64})$`)

// appAuth signs an App's JSON web tokens and keeps the current one.
type appAuth struct {
	iss json.RawMessage // a number for an App ID, a string for a client ID
	key *rsa.PrivateKey
	now func() time.Time

	mu    sync.Mutex
	token string
	exp   time.Time
}

// jwt returns a token valid for at least another minute.
func (a *appAuth) jwt() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if a.token != "" && now.Before(a.exp.Add(-jwtRenew)) {
		return a.token, nil
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	exp := now.Add(jwtLifetime)
	claims, err := json.Marshal(struct {
		IAT int64           `json:"iat"`
		EXP int64           `json:"exp"`
		ISS json.RawMessage `json:"iss"`
	}{now.Add(-jwtBackdate).Unix(), exp.Unix(), a.iss})
	if err != nil {
		return "", err
	}
	signing := header + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	a.token, a.exp = signing+"."+base64.RawURLEncoding.EncodeToString(sig), exp
	return a.token, nil
}

// parseAppKey reads the App's private key as GitHub issues it (PKCS#1 PEM) or in PKCS#8. The
// message never carries the key.
func parseAppKey(pemKey string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(strings.TrimSpace(pemKey)))
	if block == nil {
		return nil, invalid("the GitHub App private key is not PEM (the .pem file GitHub issues for the App)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if rk, ok := k.(*rsa.PrivateKey); err == nil && ok {
		return rk, nil
	}
	return nil, invalid("the GitHub App private key does not parse as an RSA private key (PKCS#1 or PKCS#8)")
}

// AppClient manages a GitHub App's webhook. It is safe for concurrent use.
type AppClient struct {
	c *Client
}

var (
	_ providers.Client         = (*AppClient)(nil)
	_ providers.Recoverer      = (*AppClient)(nil)
	_ providers.HealthReporter = (*AppClient)(nil)
)

// NewApp builds a client for the App cfg.Target names ("app/<App ID or client ID>") whose private
// key (PEM) is cfg.Credential. A key that does not parse, or an id of another shape, is refused
// here, before any request; a key that is not the App's is refused by GitHub (Unauthorized).
func NewApp(cfg providers.Config) (*AppClient, error) {
	id, ok := strings.CutPrefix(cfg.Target, "app/")
	if !ok || !appID.MatchString(id) {
		return nil, invalid("github App target must be app/<App ID> (digits) or app/<client ID> (Iv…)")
	}
	if strings.TrimSpace(cfg.Credential) == "" {
		return nil, invalid("the GitHub App private key is empty")
	}
	key, err := parseAppKey(cfg.Credential)
	if err != nil {
		return nil, err
	}
	iss := json.RawMessage(id)
	if strings.HasPrefix(id, "Iv") {
		iss, _ = json.Marshal(id)
	}
	c, err := newClient(cfg, "app/"+id)
	if err != nil {
		return nil, err
	}
	c.app = &appAuth{iss: iss, key: key, now: cfg.Clock()}
	c.rc.OnBeforeRequest(func(_ *resty.Client, r *resty.Request) error {
		tok, err := c.app.jwt()
		if err != nil {
			return &providers.Error{Kind: providers.Permanent, Message: "signing the App's JSON web token failed"}
		}
		r.SetAuthToken(tok)
		return nil
	})
	c.caps = appCapabilities(c.caps.Recovery)
	return &AppClient{c: c}, nil
}

// appCapabilities: one webhook per App (a singleton), no marker (the App is the proof: whoever
// holds its key owns its one webhook), a secret the client chooses and resends on every PATCH
// (whether GitHub keeps an omitted one is not documented), no description or status of its
// own, events read-only, and the repository hooks' delivery log recovery.
func appCapabilities(recovery providers.RecoveryCapabilities) providers.Capabilities {
	return providers.Capabilities{
		Secret:            providers.SecretClientChosen,
		UpdateNeedsSecret: true,
		ReadOnly:          providers.FieldEvents,
		Singleton:         true,
		Rate:              documentedRate,
		RateLimitBackoff:  secondaryBackoff,
		Recovery:          recovery,
	}
}

// Capabilities says what a GitHub App's webhook can promise.
func (a *AppClient) Capabilities() providers.Capabilities { return a.c.caps }

// appConfig is webhook-config.
type appConfig struct {
	URL         string          `json:"url"`
	ContentType string          `json:"content_type"`
	InsecureSSL json.RawMessage `json:"insecure_ssl"`
}

func (a *AppClient) config(ctx context.Context) (appConfig, error) {
	var cfg appConfig
	resp, err := a.c.rc.R().SetContext(ctx).Get("/app/hook/config")
	if err != nil {
		return cfg, a.c.networkError(err)
	}
	if resp.StatusCode() != http.StatusOK {
		return cfg, a.c.classify(resp, opUpdate)
	}
	if json.Unmarshal(resp.Body(), &cfg) != nil {
		return cfg, &providers.Error{Kind: providers.Transient, Message: "GitHub's webhook config is not a JSON object"}
	}
	return cfg, nil
}

// events reads the events the App's settings subscribe to (GET /app).
func (a *AppClient) events(ctx context.Context) ([]string, error) {
	resp, err := a.c.rc.R().SetContext(ctx).Get("/app")
	if err != nil {
		return nil, a.c.networkError(err)
	}
	if resp.StatusCode() != http.StatusOK {
		return nil, a.c.classify(resp, opUpdate)
	}
	var app struct {
		Events []string `json:"events"`
	}
	if json.Unmarshal(resp.Body(), &app) != nil {
		return nil, &providers.Error{Kind: providers.Transient, Message: "GitHub's App is not a JSON object"}
	}
	return app.Events, nil
}

// registration is the webhook as config and events show it; content_type other than json and
// TLS verification turned off are settings an update repairs.
func (a *AppClient) registration(cfg appConfig, events []string) providers.Registration {
	r := providers.Registration{ID: AppHookID, URL: cfg.URL, Events: events}
	if cfg.ContentType != "json" {
		r.Misconfigured = append(r.Misconfigured, "content_type")
	}
	if s := strings.Trim(string(cfg.InsecureSSL), `"`); s != "0" && s != "" {
		r.Misconfigured = append(r.Misconfigured, "insecure_ssl")
	}
	return r
}

// List returns the App's webhook, or nothing while it has no URL: two requests, its config and
// the App's events.
func (a *AppClient) List(ctx context.Context) ([]providers.Registration, error) {
	cfg, err := a.config(ctx)
	if err != nil || cfg.URL == "" {
		return nil, err
	}
	events, err := a.events(ctx)
	if err != nil {
		return nil, err
	}
	return []providers.Registration{a.registration(cfg, events)}, nil
}

// Create points the App's webhook at d.URL with d.Secret, when it has no URL or this one: an App
// has one webhook, so one that delivers elsewhere (set by hand, or by another cluster) is
// AlreadyExists, never overwritten here; the adoption policy decides, through Update.
func (a *AppClient) Create(ctx context.Context, d providers.Desired, _ string) (providers.Registration, error) {
	if err := validate(d); err != nil {
		return providers.Registration{}, err
	}
	cfg, err := a.config(ctx)
	if err != nil {
		return providers.Registration{}, err
	}
	if cfg.URL != "" && cfg.URL != d.URL {
		return providers.Registration{}, &providers.Error{Kind: providers.AlreadyExists,
			Message: "the GitHub App's webhook already delivers to another URL: an App has one webhook"}
	}
	return a.Update(ctx, AppHookID, d)
}

// Update sets the webhook's URL, content type (json), TLS verification and secret. The events
// are the App's settings': they are read, never written (Capabilities.ReadOnly).
func (a *AppClient) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	if err := a.c.checkID(id); err != nil {
		return providers.Registration{}, err
	}
	if err := validate(d); err != nil {
		return providers.Registration{}, err
	}
	body := map[string]string{"url": d.URL, "content_type": "json", "insecure_ssl": "0", "secret": d.Secret}
	resp, err := a.c.rc.R().SetContext(ctx).SetBody(body).Patch("/app/hook/config")
	if err != nil {
		return providers.Registration{}, a.c.networkError(err)
	}
	if resp.StatusCode() != http.StatusOK {
		return providers.Registration{}, a.c.classify(resp, opUpdate)
	}
	var cfg appConfig
	if json.Unmarshal(resp.Body(), &cfg) != nil {
		return providers.Registration{}, &providers.Error{Kind: providers.Transient, Message: "GitHub's webhook config is not a JSON object"}
	}
	events, err := a.events(ctx)
	if err != nil {
		return providers.Registration{}, err
	}
	return a.registration(cfg, events), nil
}

// Delete refuses: the webhook is part of the App, and the API cannot remove or deactivate it.
func (a *AppClient) Delete(context.Context, string) error {
	return &providers.Error{Kind: providers.Permanent,
		Message: "a GitHub App's webhook is part of the App and cannot be deleted through the API: deactivate it in the App's settings"}
}

// Missed, Redeliver and Health read and use the App's delivery log as repository hooks' are.
func (a *AppClient) Missed(ctx context.Context, reg providers.Registration, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	return a.c.Missed(ctx, reg, events, since, limit)
}

func (a *AppClient) Redeliver(ctx context.Context, reg providers.Registration, m providers.Missed) error {
	return a.c.Redeliver(ctx, reg, m)
}

func (a *AppClient) Health(ctx context.Context, reg providers.Registration) (providers.DeliveryHealth, error) {
	return a.c.Health(ctx, reg)
}
