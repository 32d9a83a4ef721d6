// Package stripe implements providers.Client for Stripe webhook endpoints on stripe-go v76.
//
// Every Client has its own stripe-go client (no global stripe.Key or backend), retries are off
// because the reconciler owns retry and backoff, and every error is classified into a
// *providers.Error that never contains the API key.
package stripe

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
	"github.com/stripe/stripe-go/v76/form"

	"github.com/hookwarden/hookwarden/providers"
)

// DefaultTimeout bounds one HTTP request when Config.Timeout is zero.
const DefaultTimeout = 20 * time.Second

// pageSize is Stripe's maximum page size; an account holds at most 16 endpoints, so List is
// normally a single request.
const pageSize = 100

// maxIdempotencyKey is the longest key Stripe (and stripe-go) accept.
const maxIdempotencyKey = 255

// Client manages the webhook endpoints of one Stripe account. It is safe for concurrent use.
type Client struct {
	api *client.API
	key string
	now func() time.Time
}

var _ providers.Client = (*Client)(nil)

// capabilities: Stripe keeps an ownership marker in metadata, generates the secret and returns
// it only in the create response, replays a create by Idempotency-Key for 24 hours, and keeps
// events (the missed ones among them) for 30 days.
var capabilities = providers.Capabilities{
	Markers:          true,
	Secret:           providers.SecretReturnedOnCreate,
	ReplayableCreate: true,
	Fields:           providers.FieldDescription | providers.FieldDisabled | providers.FieldMarker,
	RateLimitBackoff: rateLimitBackoff,
	// Events are fetched from /v1/events, which goes back 30 days.
	Recovery: providers.RecoveryCapabilities{Mode: providers.RecoveryFetch, Window: EventRetention, AccountWide: true},
}

// rateLimitBackoff fits Stripe's limiters, which count per second (PROVIDERS.md §1.3) and
// answer 429 without Retry-After. The manager already paces a key at its documented rate, so a
// 429 means others share the key's budget (or lock_timeout: contention on one object); a
// second lets a whole window pass, doubling makes room for them, and past 30 s (thirty windows,
// six times stripe-go's own 5 s retry cap) a longer wait finds the same refilled budget and
// only delays the subscription.
var rateLimitBackoff = providers.Backoff{First: time.Second, Factor: 2, Max: 30 * time.Second}

// Stripe's documented rate limits (docs.stripe.com/rate-limits, PROVIDERS.md §1.3): 25
// operations per second in test mode (sandbox), 100 in live mode, per account. Stripe does not
// document a burst; a small one keeps the manager under a limiter that counts per second.
var (
	testModeRate = providers.Rate{PerSecond: 25, Burst: 5}
	liveModeRate = providers.Rate{PerSecond: 100, Burst: 10}
)

// Capabilities says what Stripe can promise. The rate is the key's mode: live for sk_live_ and
// rk_live_ keys, test mode (the lower) for every other key.
func (c *Client) Capabilities() providers.Capabilities {
	caps := capabilities
	caps.Rate = RateFor(c.key)
	return caps
}

// RateFor is the documented rate of the account behind key, by its mode.
func RateFor(key string) providers.Rate {
	if strings.HasPrefix(key, "sk_live_") || strings.HasPrefix(key, "rk_live_") {
		return liveModeRate
	}
	return testModeRate
}

// New builds a Client for the account whose secret API key is cfg.Credential. cfg.APIURL
// overrides https://api.stripe.com (stripe-mock, fakes); cfg.Timeout defaults to DefaultTimeout.
// Configuration errors are *providers.Error of kind Permanent.
func New(cfg providers.Config) (*Client, error) {
	key := cfg.Credential
	if err := providers.CheckCredential("stripe API key", cfg.Credential); err != nil {
		return nil, err
	}

	base := stripego.APIURL
	if cfg.APIURL != "" {
		u, err := url.Parse(cfg.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, invalid("stripe API URL must be an absolute http(s) URL")
		}
		base = cfg.APIURL
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	httpClient := &http.Client{Timeout: timeout, Transport: userAgentTransport{next: providers.PacedTransport(nil, cfg.Transport()), product: providers.UserAgent()}}

	// GetBackendWithConfig writes defaults into the config it gets, so each backend gets its own.
	// Connect and Uploads are never called; with a custom API URL they point there too, so that
	// nothing built for a test or stripe-mock can reach Stripe itself.
	backend := func(t stripego.SupportedBackend, defaultURL string) stripego.Backend {
		u := defaultURL
		if cfg.APIURL != "" {
			u = base
		}
		return stripego.GetBackendWithConfig(t, &stripego.BackendConfig{
			URL:               stripego.String(u),
			HTTPClient:        httpClient,
			MaxNetworkRetries: stripego.Int64(0),
			EnableTelemetry:   stripego.Bool(false),
			// A nil logger means stripe-go's default logger, which prints to stderr.
			LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull},
		})
	}
	api := client.New(key, &stripego.Backends{
		API:     backend(stripego.APIBackend, base),
		Connect: backend(stripego.ConnectBackend, stripego.ConnectURL),
		Uploads: backend(stripego.UploadsBackend, stripego.UploadsURL),
	})
	return &Client{api: api, key: key, now: cfg.Clock()}, nil
}

// rawPage is one list page with its endpoints left undecoded: stripe-go decodes a page into
// []*WebhookEndpoint in one go, so a single endpoint of an unexpected shape would fail the
// page, and with it every subscription on the account.
type rawPage struct {
	stripego.APIResource
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

// List returns every webhook endpoint on the account, following all pages (has_more, then
// starting_after the last endpoint's id, as stripe-go's iterator does). Endpoints are decoded
// one by one: one that does not fit is listed with Unfit, the others intact.
func (c *Client) List(ctx context.Context) ([]providers.Registration, error) {
	var regs []providers.Registration
	seen := map[string]bool{}
	after := ""
	for {
		q := &form.Values{}
		q.Add("limit", strconv.Itoa(pageSize))
		if after != "" {
			q.Add("starting_after", after)
		}
		var page rawPage
		if err := c.api.WebhookEndpoints.B.CallRaw(http.MethodGet, "/v1/webhook_endpoints", c.key, q, &stripego.Params{Context: ctx}, &page); err != nil {
			return nil, c.classify(err)
		}
		last := ""
		for _, raw := range page.Data {
			reg := decodeEndpoint(raw)
			last = reg.ID
			if reg.ID == "" {
				regs = append(regs, reg)
				continue
			}
			if seen[reg.ID] {
				// A server that keeps returning the same page would otherwise loop forever.
				return nil, &providers.Error{Kind: providers.Transient, Message: "list pagination did not advance past " + reg.ID}
			}
			seen[reg.ID] = true
			regs = append(regs, reg)
		}
		if !page.HasMore {
			return regs, nil
		}
		if last == "" {
			return nil, &providers.Error{Kind: providers.Transient, Message: "list page says more follow, but its last endpoint has no id to continue from"}
		}
		after = last
	}
}

// decodeEndpoint reads one webhook endpoint field by field, so a field of an unexpected type
// spoils only itself; what does not fit is named in Unfit (field names, never values). null
// reads as the field's empty value, as stripe-go reads it.
func decodeEndpoint(raw json.RawMessage) providers.Registration {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return providers.Registration{Unfit: "the endpoint is not a JSON object"}
	}
	var problems []string
	read := func(name, kind string, v any, required bool) {
		b, ok := fields[name]
		switch {
		case !ok && required:
			problems = append(problems, name+" is missing")
		case !ok, string(b) == "null":
		case json.Unmarshal(b, v) != nil:
			problems = append(problems, name+" is not "+kind)
		}
	}
	var we stripego.WebhookEndpoint
	read("id", "a string", &we.ID, true)
	read("url", "a string", &we.URL, true)
	read("enabled_events", "an array of strings", &we.EnabledEvents, true)
	read("description", "a string", &we.Description, false)
	read("status", "a string", &we.Status, false)
	read("metadata", "an object of strings", &we.Metadata, false)
	read("created", "a number", &we.Created, false)
	r := registration(&we)
	r.Unfit = strings.Join(problems, "; ")
	return r
}

// Create registers a webhook endpoint and returns it with its signing secret.
//
// The endpoint is created with api_version pinned to stripe-go's (stripe.APIVersion), because
// stripe-go's webhook.ConstructEvent rejects events of any other version and api_version cannot
// be changed after create. The ownership marker and idempotencyKey are stored in metadata, so a
// lost secret can be recovered by replaying the identical create with the same key.
//
// Stripe's create has no disabled parameter, so a disabled endpoint is created enabled and then
// disabled by an update. If that update fails, Create returns the error together with the
// created registration (ID and Secret set), so the caller can still persist the secret.
func (c *Client) Create(ctx context.Context, d providers.Desired, idempotencyKey string) (providers.Registration, error) {
	if err := validate(d); err != nil {
		return providers.Registration{}, err
	}
	switch {
	case idempotencyKey == "":
		return providers.Registration{}, invalid("idempotency key is empty")
	case strings.TrimSpace(idempotencyKey) != idempotencyKey:
		// stripe-go trims the header but not our metadata copy; they must match for recovery.
		return providers.Registration{}, invalid("idempotency key has leading or trailing whitespace")
	case len(idempotencyKey) > maxIdempotencyKey:
		return providers.Registration{}, invalid("idempotency key is longer than 255 characters")
	}

	params := &stripego.WebhookEndpointParams{
		URL:           stripego.String(d.URL),
		EnabledEvents: stripego.StringSlice(canonicalEvents(d.Events)),
		Metadata:      MarkerMetadata(d.Owner, idempotencyKey),
		APIVersion:    stripego.String(stripego.APIVersion),
	}
	if d.Description != "" {
		params.Description = stripego.String(d.Description)
	}
	params.Context = ctx
	params.IdempotencyKey = stripego.String(idempotencyKey)

	we, err := c.api.WebhookEndpoints.New(params)
	if err != nil {
		return providers.Registration{}, c.classify(err)
	}
	reg := registration(we)
	if !d.Disabled || reg.Disabled {
		return reg, nil
	}

	disable := &stripego.WebhookEndpointParams{Disabled: stripego.Bool(true)}
	disable.Context = ctx
	updated, err := c.api.WebhookEndpoints.Update(we.ID, disable)
	if err != nil {
		return reg, c.classify(err)
	}
	out := registration(updated)
	out.Secret = reg.Secret // only the create response carries it
	return out, nil
}

// Update changes URL, events, description, disabled and the ownership marker of endpoint id.
// An empty Description clears it. A zero Owner leaves the stored marker alone; otherwise the
// marker is set to exactly d.Owner and the stored create key is kept. api_version and connect are
// never sent: Stripe accepts them only on create.
func (c *Client) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	if err := checkUpdate(endpointNoun, id, d); err != nil {
		return providers.Registration{}, err
	}
	// Non-nil params also make stripe-go attach an Idempotency-Key.
	params := &stripego.WebhookEndpointParams{
		URL:           stripego.String(d.URL),
		EnabledEvents: stripego.StringSlice(d.Events),
		Description:   stripego.String(d.Description),
		Disabled:      stripego.Bool(d.Disabled),
	}
	if !d.Owner.IsZero() {
		params.Metadata = ownerUpdateMetadata(d.Owner)
	}
	params.Context = ctx

	we, err := c.api.WebhookEndpoints.Update(id, params)
	if err != nil {
		return providers.Registration{}, c.classify(err)
	}
	return registration(we), nil
}

// Delete removes endpoint id; an endpoint that is already gone is not an error.
func (c *Client) Delete(ctx context.Context, id string) error {
	if err := requireID(endpointNoun, id); err != nil {
		return err
	}
	// Non-nil params: with nil, stripe-go sends the DELETE without an Idempotency-Key.
	params := &stripego.WebhookEndpointParams{}
	params.Context = ctx
	if _, err := c.api.WebhookEndpoints.Del(id, params); err != nil {
		if err = c.classify(err); !providers.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// canonicalEvents is the order a create sends enabled_events in: sorted, without repeats. Stripe
// replays a create only when its parameters are identical, and lists enabled_events in an order
// it does not promise; a replay rebuilt from a listed endpoint therefore gets the same request
// only if the order never depended on where the list came from.
func canonicalEvents(events []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(events)))
}

// validate rejects, before any request, an empty URL or event list: both are required on create,
// and an endpoint that receives no events is never what a user asked for.
func validate(d providers.Desired) error {
	if d.URL == "" {
		return invalid("webhook URL is empty")
	}
	if len(d.Events) == 0 {
		return invalid("at least one event type is required")
	}
	return nil
}

// What the two clients call the object an id names, in their errors.
const (
	endpointNoun    = "webhook endpoint"
	destinationNoun = "event destination"
)

// requireID rejects, before any request, an empty id of the object what names.
func requireID(what, id string) error {
	if id == "" {
		return invalid(what + " id is empty")
	}
	return nil
}

// checkUpdate is what an update checks before any request: the id, then the Desired (validate).
func checkUpdate(what, id string, d providers.Desired) error {
	if err := requireID(what, id); err != nil {
		return err
	}
	return validate(d)
}

func registration(we *stripego.WebhookEndpoint) providers.Registration {
	owner, createKey := OwnerFromMetadata(we.Metadata)
	r := providers.Registration{
		ID:          we.ID,
		URL:         we.URL,
		Events:      slices.Clone(we.EnabledEvents),
		Description: we.Description,
		Disabled:    we.Status == "disabled",
		Health:      health(we.Status),
		Owner:       owner,
		CreateKey:   createKey,
		Secret:      we.Secret,
	}
	if we.Created != 0 {
		r.Created = time.Unix(we.Created, 0).UTC()
	}
	return r
}

// userAgentTransport appends Hookwarden's product token to stripe-go's User-Agent ("Stripe/v1
// GoBindings/76.25.0 hookwarden/<version> (+https://github.com/hookwarden/hookwarden)"), the
// line stripe.SetAppInfo would give, without SetAppInfo's process-wide state.
type userAgentTransport struct {
	next    http.RoundTripper
	product string
}

func (t userAgentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	req.Header.Set("User-Agent", strings.TrimSpace(req.Header.Get("User-Agent")+" "+t.product))
	return t.next.RoundTrip(req)
}
