package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	stripego "github.com/stripe/stripe-go/v76"

	"github.com/hookwarden/hookwarden/providers"
)

// V2APIVersion is the Stripe-Version every v2 request carries. stripe-go v76 pins 2023-10-16,
// older than v2 itself (event destinations arrived with 2024-09-30.acacia), so the v2 client
// names its own.
const V2APIVersion = "2025-03-31.basil"

// Variants of a Stripe registration (providers.Registration.Variant): a v1 webhook endpoint
// (empty, the provider's first kind) and v2 event destinations by payload. One URL may carry
// one of each during Stripe's migration; they are never twins of each other.
const (
	VariantV1       = ""
	VariantThin     = "v2/thin"
	VariantSnapshot = "v2/snapshot"
)

// destinationsPath is the v2 event destinations collection.
const destinationsPath = "/v2/core/event_destinations"

// v2PageSize asks for pages of 20; an account holds at most 16 destinations (Stripe counts v1
// endpoints and v2 destinations against one cap), so a list is one request.
const v2PageSize = 20

// maxV2Pages bounds one list: a next_page_url that never ends fails it instead of looping.
const maxV2Pages = 50

// includeURL asks a read for the destination's URL, which Stripe leaves out otherwise.
const includeURL = "webhook_endpoint.url"

// Destinations manages the v2 event destinations (type webhook_endpoint) of one Stripe account,
// with the payload its settings name. It is safe for concurrent use.
type Destinations struct {
	http    *resty.Client
	base    *url.URL
	key     string
	payload string // "thin" or "snapshot"
	now     func() time.Time
}

var _ providers.Client = (*Destinations)(nil)

// Settings is spec.provider.stripe as Config.Settings carries it.
type Settings struct {
	APIVersion   string `json:"apiVersion,omitempty"`
	EventPayload string `json:"eventPayload,omitempty"`
}

// parseSettings reads Config.Settings (or a spec.provider.stripe block): unknown fields and
// values are refused, a v2 payload defaults to thin, and v1 (or nothing) is the zero Settings.
func parseSettings(b []byte) (Settings, error) {
	var s Settings
	if t := strings.TrimSpace(string(b)); t == "" || t == "null" {
		return s, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Settings{}, fmt.Errorf("spec.provider.stripe: %v", err)
	}
	switch s.APIVersion {
	case "", "v1":
		if s.EventPayload != "" {
			return Settings{}, errors.New("spec.provider.stripe.eventPayload is for apiVersion v2 (v1 endpoints send snapshot events)")
		}
		return Settings{}, nil
	case "v2":
	default:
		return Settings{}, fmt.Errorf("spec.provider.stripe.apiVersion must be v1 or v2, not %q", s.APIVersion)
	}
	switch s.EventPayload {
	case "":
		s.EventPayload = "thin"
	case "thin", "snapshot":
	default:
		return Settings{}, fmt.Errorf("spec.provider.stripe.eventPayload must be thin or snapshot, not %q", s.EventPayload)
	}
	return s, nil
}

// NewDestinations builds a v2 client for the account whose secret key is cfg.Credential, with
// the payload cfg.Settings names (thin unless snapshot). cfg.APIURL overrides
// https://api.stripe.com.
func NewDestinations(cfg providers.Config) (*Destinations, error) {
	if err := providers.CheckCredential("stripe API key", cfg.Credential); err != nil {
		return nil, err
	}
	s, err := parseSettings(cfg.Settings)
	if err != nil {
		return nil, invalid(err.Error())
	}
	if s.APIVersion != "v2" {
		return nil, invalid("the v2 client needs spec.provider.stripe.apiVersion v2")
	}
	raw := stripego.APIURL
	if cfg.APIURL != "" {
		raw = cfg.APIURL
	}
	base, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, invalid("stripe API URL must be an absolute http(s) URL")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// Retries are off (the reconciler owns backoff) and redirects are refused (they would take
	// the key elsewhere).
	h := resty.New().
		SetBaseURL(base.String()).
		SetTimeout(timeout).
		SetRetryCount(0).
		SetRedirectPolicy(resty.NoRedirectPolicy()).
		SetLogger(providers.QuietLogger{}).
		SetAuthToken(cfg.Credential).
		SetHeader("Stripe-Version", V2APIVersion).
		SetHeader("User-Agent", providers.UserAgent())
	if t := cfg.Transport(); t != nil {
		h.SetTransport(t)
	}
	return &Destinations{http: h, base: base, key: cfg.Credential, payload: s.EventPayload, now: cfg.Clock()}, nil
}

// V2RecoveryUnavailable is status.recovery's message on a v2 destination.
const V2RecoveryUnavailable = "recovery is not available for Stripe v2 event destinations: Stripe lists undelivered events (delivery_success=false) for v1 webhook endpoints only, and v2 lists events without a delivery filter"

// Capabilities: as v1 (metadata marker, a secret shown only in the create answer, the same
// per-account rate), except that a replayed create is not relied on to show the secret again
// (not documented for v2: a lost secret is rotated make-before-break) and missed events are
// not fetched (v2 lists events without a delivery filter).
func (c *Destinations) Capabilities() providers.Capabilities {
	return providers.Capabilities{
		Markers:          true,
		Secret:           providers.SecretReturnedOnCreate,
		Fields:           providers.FieldDescription | providers.FieldDisabled | providers.FieldMarker,
		Rate:             RateFor(c.key),
		RateLimitBackoff: rateLimitBackoff,
		Variant:          "v2/" + c.payload,
		Recovery:         providers.RecoveryCapabilities{Unavailable: V2RecoveryUnavailable},
	}
}

// v2Error is the error object of a v2 answer.
type v2Error struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// do sends one request and decodes a 2xx answer into out; it returns a classified error
// otherwise. path is relative to the API root (with its query, for a followed page).
func (c *Destinations) do(ctx context.Context, method, path string, body any, idempotencyKey string, out any) error {
	req := c.http.R().SetContext(ctx)
	if body != nil {
		req.SetHeader("Content-Type", "application/json").SetBody(body)
	}
	if idempotencyKey != "" {
		req.SetHeader("Idempotency-Key", idempotencyKey)
	}
	res, err := req.Execute(method, path)
	if err != nil {
		return &providers.Error{Kind: providers.Transient, Message: c.redact("request failed: " + err.Error())}
	}
	if res.IsSuccess() {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(res.Body(), out); err != nil {
			return &providers.Error{Kind: providers.Transient, StatusCode: res.StatusCode(), Message: "the answer is not the JSON Stripe documents", RequestID: res.Header().Get("Request-Id")}
		}
		return nil
	}
	return c.classify(res)
}

// classify reads a v2 error answer; the kinds follow the status as for v1 (kindOf). A 403 is
// also what a key gets that may not use v2 (a restricted key): the message says so.
func (c *Destinations) classify(res *resty.Response) error {
	var e v2Error
	_ = json.Unmarshal(res.Body(), &e)
	status := res.StatusCode()
	msg := e.Error.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	out := &providers.Error{StatusCode: status, Message: c.redact(msg), RequestID: res.Header().Get("Request-Id")}
	out.RetryAfter, _ = providers.ParseRetryAfter(res.Header().Get("Retry-After"), c.now())
	out.Kind = kindOf(status, msg, false)
	if status == http.StatusForbidden {
		out.Message = "Stripe refused the v2 event destinations API for this key: " + out.Message
	}
	return out
}

func (c *Destinations) redact(s string) string { return strings.ReplaceAll(s, c.key, "[redacted]") }

// v2Page is one page of a v2 list, its destinations left undecoded so that one of an
// unexpected shape spoils only itself.
type v2Page struct {
	Data        []json.RawMessage `json:"data"`
	NextPageURL *string           `json:"next_page_url"`
}

// List returns every webhook destination on the account, asking for their URLs, following
// next_page_url verbatim (on Stripe's own host only). Destinations of other types (Amazon
// EventBridge, Azure Event Grid) deliver nowhere a subscription can name and are left out.
func (c *Destinations) List(ctx context.Context) ([]providers.Registration, error) {
	q := url.Values{"limit": {fmt.Sprint(v2PageSize)}, "include[0]": {includeURL}}
	next := destinationsPath + "?" + q.Encode()
	var regs []providers.Registration
	seenID, seenPage := map[string]bool{}, map[string]bool{}
	for n := 1; next != ""; n++ {
		if n > maxV2Pages || seenPage[next] {
			return nil, &providers.Error{Kind: providers.Transient, Message: "the destination list's next_page_url does not advance"}
		}
		seenPage[next] = true
		var page v2Page
		if err := c.do(ctx, http.MethodGet, next, nil, "", &page); err != nil {
			return nil, err
		}
		for _, raw := range page.Data {
			reg, ok := decodeDestination(raw)
			if !ok {
				continue
			}
			if reg.ID != "" && seenID[reg.ID] {
				return nil, &providers.Error{Kind: providers.Transient, Message: "list pagination repeats " + reg.ID}
			}
			seenID[reg.ID] = true
			regs = append(regs, reg)
		}
		next = ""
		if page.NextPageURL != nil && *page.NextPageURL != "" {
			var err error
			if next, err = c.sameOrigin(*page.NextPageURL); err != nil {
				return nil, err
			}
		}
	}
	return regs, nil
}

// sameOrigin is a next_page_url as a path and query on the API's own host; another host would
// receive the key.
func (c *Destinations) sameOrigin(link string) (string, error) {
	u, err := c.base.Parse(link)
	if err != nil || u.Scheme != c.base.Scheme || u.Host != c.base.Host {
		return "", &providers.Error{Kind: providers.Permanent, Message: "the destination list's next_page_url points elsewhere than Stripe's API"}
	}
	return u.RequestURI(), nil
}

// decodeDestination reads one destination field by field: what does not fit is named in Unfit
// (field names, never values). ok is false for a destination of another type than
// webhook_endpoint.
func decodeDestination(raw json.RawMessage) (providers.Registration, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return providers.Registration{Unfit: "the destination is not a JSON object"}, true
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
	var d struct {
		ID, Type, Description, Status, EventPayload, Created string
		Events                                               []string
		Metadata                                             map[string]string
		Endpoint                                             struct {
			URL           string `json:"url"`
			SigningSecret string `json:"signing_secret"`
		}
		StatusDetails struct {
			Disabled struct {
				Reason string `json:"reason"`
			} `json:"disabled"`
		}
	}
	read("id", "a string", &d.ID, true)
	read("type", "a string", &d.Type, true)
	if d.Type == "amazon_eventbridge" || d.Type == "azure_event_grid" {
		return providers.Registration{}, false
	}
	if d.Type != "webhook_endpoint" && d.Type != "" {
		problems = append(problems, "type is not webhook_endpoint")
	}
	read("enabled_events", "an array of strings", &d.Events, true)
	read("event_payload", "a string", &d.EventPayload, true)
	read("description", "a string", &d.Description, false)
	read("status", "a string", &d.Status, false)
	read("status_details", "an object", &d.StatusDetails, false)
	read("metadata", "an object of strings", &d.Metadata, false)
	read("created", "a string", &d.Created, false)
	read("webhook_endpoint", "an object", &d.Endpoint, true)
	if _, ok := fields["webhook_endpoint"]; ok && d.Endpoint.URL == "" {
		problems = append(problems, "webhook_endpoint.url is missing (a read without include=webhook_endpoint.url)")
	}
	owner, createKey := OwnerFromMetadata(d.Metadata)
	r := providers.Registration{
		ID:          d.ID,
		URL:         d.Endpoint.URL,
		Events:      d.Events,
		Description: d.Description,
		Disabled:    d.Status == "disabled",
		Health:      destinationHealth(d.Status, d.StatusDetails.Disabled.Reason),
		Owner:       owner,
		CreateKey:   createKey,
		Secret:      d.Endpoint.SigningSecret,
		Variant:     "v2/" + d.EventPayload,
		Unfit:       strings.Join(problems, "; "),
	}
	if strings.HasPrefix(d.ID, "we_") {
		r.Variant = VariantV1 // a v1 endpoint shown among the destinations
	}
	if t, err := time.Parse(time.RFC3339, d.Created); err == nil {
		r.Created = t.UTC()
	}
	return r, true
}

// read is one destination answer decoded, or the error.
func (c *Destinations) read(ctx context.Context, method, path string, body any, idempotencyKey string) (providers.Registration, error) {
	var raw json.RawMessage
	if err := c.do(ctx, method, path, body, idempotencyKey, &raw); err != nil {
		return providers.Registration{}, err
	}
	reg, ok := decodeDestination(raw)
	if !ok || reg.Unfit != "" {
		return reg, &providers.Error{Kind: providers.Permanent, Message: "Stripe answered with a destination of another shape: " + reg.Unfit}
	}
	return reg, nil
}

// destinationName is the name Stripe requires on create: the subscription it belongs to.
func destinationName(o providers.Owner) string {
	if o.Namespace == "" && o.Name == "" {
		return "hookwarden"
	}
	return "hookwarden " + o.Namespace + "/" + o.Name
}

// Create makes an event destination of type webhook_endpoint with the client's payload, asking
// for its signing secret (shown in this answer only) and URL. A snapshot destination renders
// events at stripe-go v76's API version, as v1 endpoints are pinned to it. Stripe's create has
// no status, so a disabled one is created and then disabled; if that fails, the created
// registration comes back with the error, secret included, for the caller to keep.
func (c *Destinations) Create(ctx context.Context, d providers.Desired, idempotencyKey string) (providers.Registration, error) {
	if err := validate(d); err != nil {
		return providers.Registration{}, err
	}
	if idempotencyKey == "" || len(idempotencyKey) > maxIdempotencyKey || strings.TrimSpace(idempotencyKey) != idempotencyKey {
		return providers.Registration{}, invalid("idempotency key is empty, longer than 255 characters or padded")
	}
	body := map[string]any{
		"name":             destinationName(d.Owner),
		"type":             "webhook_endpoint",
		"event_payload":    c.payload,
		"enabled_events":   canonicalEvents(d.Events),
		"webhook_endpoint": map[string]string{"url": d.URL},
		"metadata":         MarkerMetadata(d.Owner, idempotencyKey),
		"include":          []string{"webhook_endpoint.signing_secret", includeURL},
	}
	if d.Description != "" {
		body["description"] = d.Description
	}
	if c.payload == "snapshot" {
		body["snapshot_api_version"] = stripego.APIVersion
	}
	reg, err := c.read(ctx, http.MethodPost, destinationsPath, body, idempotencyKey)
	if err != nil || !d.Disabled || reg.Disabled {
		return reg, err
	}
	return c.setStatus(ctx, reg, true)
}

// destinationHealth is what a destination's status says about deliveries to it. Stripe's
// description of v2 event destinations gives two reasons for a disabled one,
// status_details.disabled.reason: user (disabled in Workbench or by the API: a drift the plan
// repairs by enabling it when the spec says enabled) and no_aws_event_source_exists (an Amazon
// EventBridge destination's); none for failing deliveries. Any reason but user, or none, is read
// as the provider's pause, as a v1 endpoint's disabled status is.
func destinationHealth(status, reason string) *providers.DeliveryHealth {
	if status == "disabled" && reason == "user" {
		return nil
	}
	return health(status)
}

// setStatus enables or disables a destination and returns reg with the status Stripe answers;
// the enable and disable answers carry no URL or secret, which reg keeps.
func (c *Destinations) setStatus(ctx context.Context, reg providers.Registration, disabled bool) (providers.Registration, error) {
	action := "/enable"
	if disabled {
		action = "/disable"
	}
	var got struct {
		Status string `json:"status"`
	}
	if err := c.do(ctx, http.MethodPost, destinationsPath+"/"+url.PathEscape(reg.ID)+action, map[string]any{}, "", &got); err != nil {
		return reg, err
	}
	reg.Disabled = got.Status == "disabled"
	reg.Health = health(got.Status)
	return reg, nil
}

// Update changes events, URL, description and the ownership marker in place, then enables or
// disables the destination when its status differs. event_payload cannot change: a destination
// of the other payload is another variant. An empty description is removed (null); a zero Owner
// leaves the marker alone, otherwise each owner key is set, an empty one removed.
func (c *Destinations) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	if err := checkUpdate(destinationNoun, id, d); err != nil {
		return providers.Registration{}, err
	}
	body := map[string]any{
		"enabled_events":   d.Events,
		"webhook_endpoint": map[string]string{"url": d.URL},
		"description":      nil,
		"include":          []string{includeURL},
	}
	if d.Description != "" {
		body["description"] = d.Description
	}
	if !d.Owner.IsZero() {
		md := map[string]*string{}
		for k, v := range ownerUpdateMetadata(d.Owner) {
			if v != "" {
				md[k] = &v
			} else {
				md[k] = nil
			}
		}
		body["metadata"] = md
	}
	reg, err := c.read(ctx, http.MethodPost, destinationsPath+"/"+url.PathEscape(id), body, "")
	if err != nil || reg.Disabled == d.Disabled {
		return reg, err
	}
	return c.setStatus(ctx, reg, d.Disabled)
}

// Delete removes destination id; one already gone is not an error.
func (c *Destinations) Delete(ctx context.Context, id string) error {
	if err := requireID(destinationNoun, id); err != nil {
		return err
	}
	if err := c.do(ctx, http.MethodDelete, destinationsPath+"/"+url.PathEscape(id), nil, "", nil); err != nil && !providers.IsNotFound(err) {
		return err
	}
	return nil
}
