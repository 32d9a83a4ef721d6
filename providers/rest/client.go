package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"
	"github.com/tidwall/gjson"

	"github.com/hookwarden/hookwarden/providers"
)

// DefaultTimeout bounds one HTTP request when Config.Timeout is zero.
const DefaultTimeout = 20 * time.Second

// Client manages the registrations of one account (what the parameters select) at the API a
// profile describes. It is safe for concurrent use and keeps no state between calls.
type Client struct {
	c        *compiled
	params   map[string]string
	base     string
	cred     string
	http     *resty.Client
	caps     providers.Capabilities
	spec     []byte
	maxPages int
	maxBytes int
	now      func() time.Time
}

var (
	_ providers.Client            = (*Client)(nil)
	_ providers.VerifierDescriber = (*Client)(nil)
	_ providers.SecretFetcher     = (*Client)(nil)
	_ providers.Pinger            = (*PingingClient)(nil)
)

// PingingClient is a Client whose profile has a ping request; New returns it only then, so
// the reconciler pings exactly the APIs that can.
type PingingClient struct{ *Client }

// Ping asks the API for a test delivery to registration id.
func (p *PingingClient) Ping(ctx context.Context, id string) error {
	_, err := p.do(ctx, call{op: p.c.p.Ping, method: http.MethodPost, id: id})
	return err
}

// Factory returns a providers.Factory that builds clients with New.
func Factory() providers.Factory {
	return providers.FactoryFunc(func(cfg providers.Config) (providers.Client, error) {
		c, err := New(cfg)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	})
}

// Target encodes subscription parameters as providers.Config.Target: what one list covers.
func Target(params map[string]string) string {
	v := url.Values{}
	for k, val := range params {
		v.Set(k, val)
	}
	return v.Encode()
}

// New builds a Client from cfg.Settings (the profile, YAML or JSON), cfg.Target (the
// parameters, see Target) and cfg.Credential. cfg.APIURL replaces the profile's baseURL.
// Errors are *providers.Error of kind Permanent naming what is wrong (the profile's problems
// with their field paths); they never contain the credential.
func New(cfg providers.Config) (*Client, error) {
	p, err := decode(cfg.Settings)
	if err != nil {
		return nil, invalid(err.Error())
	}
	c, err := compile(p)
	if err != nil {
		return nil, invalid(err.Error())
	}
	if err := providers.CheckCredential("the credential", cfg.Credential); err != nil {
		return nil, err
	}
	params, err := c.parameters(cfg.Target)
	if err != nil {
		return nil, invalid(err.Error())
	}
	cl := &Client{c: c, params: params, cred: cfg.Credential, maxPages: DefaultMaxPages, maxBytes: DefaultMaxResponseBytes, now: cfg.Clock()}
	if p.Limits.MaxPages > 0 {
		cl.maxPages = p.Limits.MaxPages
	}
	if p.Limits.MaxResponseBytes > 0 {
		cl.maxBytes = p.Limits.MaxResponseBytes
	}
	if cfg.APIURL != "" {
		cl.base = cfg.APIURL
	} else if cl.base, err = cl.render(p.BaseURL, nil); err != nil {
		return nil, err
	}
	if err := checkBase(cl.base); err != nil {
		return nil, err
	}
	cl.base = strings.TrimRight(cl.base, "/")
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// Retries are off: the reconciler owns retry and backoff. Redirects are not followed: an
	// API that redirects is misconfigured (a login page), and following would send the
	// credential elsewhere.
	cl.http = resty.New().
		SetTimeout(timeout).
		SetRetryCount(0).
		SetRedirectPolicy(resty.NoRedirectPolicy()).
		SetResponseBodyLimit(cl.maxBytes).
		// The profile's headers may replace it (an API that wants its own).
		SetHeader("User-Agent", providers.UserAgent()).
		SetLogger(providers.QuietLogger{})
	if t := cfg.Transport(); t != nil {
		cl.http.SetTransport(t)
	}
	cl.caps = capabilities(p)
	cl.caps.Recovery = recoveryCapabilities(p)
	if cl.spec, err = json.Marshal(p.Verify); err != nil {
		return nil, invalid("verify: " + err.Error())
	}
	return cl, nil
}

// checkBase accepts an absolute http(s) base URL, with a path when the API is served under
// one (GitLab at https://host/gitlab), but without credentials, a query, a fragment or dot
// segments: a parameter must not be able to point the credential somewhere else.
func checkBase(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("the API base URL must be an absolute http(s) URL")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return invalid("the API base URL must not carry credentials, a query or a fragment")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return invalid("the API base URL must not have . or .. path segments")
		}
	}
	return nil
}

// parameters decodes a Target and checks it against the declared parameters.
func (c *compiled) parameters(target string) (map[string]string, error) {
	v, err := url.ParseQuery(target)
	if err != nil {
		return nil, fmt.Errorf("parameters do not decode: %v", err)
	}
	out := map[string]string{}
	var problems []string
	for k, vals := range v {
		if _, ok := c.params[k]; !ok {
			problems = append(problems, fmt.Sprintf("parameter %q is not declared by profile %s", k, c.p.Name))
			continue
		}
		if len(vals) != 1 {
			problems = append(problems, fmt.Sprintf("parameter %q is given %d times", k, len(vals)))
			continue
		}
		out[k] = vals[0]
	}
	for _, prm := range c.p.Parameters {
		val, ok := out[prm.Name]
		if !ok || val == "" {
			if prm.Required {
				problems = append(problems, fmt.Sprintf("parameter %q is required by profile %s", prm.Name, c.p.Name))
				continue
			}
			val = prm.Default
			out[prm.Name] = val
		}
		if prm.Pattern != "" && val != "" && !regexp.MustCompile("^(?:"+prm.Pattern+")$").MatchString(val) {
			problems = append(problems, fmt.Sprintf("parameter %q: %q does not match %s", prm.Name, val, prm.Pattern))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

func capabilities(p *Profile) providers.Capabilities {
	caps := providers.Capabilities{
		Markers: p.Marker.Location != MarkerNone, UpdateNeedsSecret: p.Secret.SendOnUpdate,
		RateLimitBackoff: p.Errors.RateLimit.Backoff.Policy(),
	}
	switch p.Secret.Mode {
	case SecretModeClientChosen:
		caps.Secret = providers.SecretClientChosen
	case SecretModeReturnedOnCreate:
		caps.Secret = providers.SecretReturnedOnCreate
	case SecretModeReadable:
		caps.Secret = providers.SecretReadable
	case SecretModeFetched:
		caps.Secret = providers.SecretFetched
	default:
		caps.Secret = providers.SecretNone
	}
	if p.Object.Description != nil {
		caps.Fields |= providers.FieldDescription
	}
	if p.Object.Disabled != nil {
		caps.Fields |= providers.FieldDisabled
	}
	if caps.Markers {
		caps.Fields |= providers.FieldMarker
	}
	recreate := p.Update.Recreate
	if p.Update.Strategy == UpdateNone {
		recreate = recreateable
	}
	for _, f := range recreate {
		caps.Recreate |= fieldBit(f)
	}
	return caps
}

func fieldBit(name string) providers.Field {
	switch name {
	case "url":
		return providers.FieldURL
	case "events":
		return providers.FieldEvents
	case "description":
		return providers.FieldDescription
	case "disabled":
		return providers.FieldDisabled
	case "marker":
		return providers.FieldMarker
	}
	return 0
}

// Capabilities says what the profile's API can promise.
func (c *Client) Capabilities() providers.Capabilities { return c.caps }

// VerifierSpec is the profile's verify section as JSON, for NewVerifierFromSpec.
func (c *Client) VerifierSpec() []byte { return slices.Clone(c.spec) }

// Profile returns the profile the client was built from.
func (c *Client) Profile() *Profile { return c.c.p }

// render executes a template with the parameters and the given extra keys.
func (c *Client) render(text string, extra map[string]string) (string, error) {
	if text == "" {
		return "", nil
	}
	t := c.c.tmpls[text]
	if t == nil {
		return "", invalid("template " + text + " was not compiled")
	}
	data := map[string]any{"Params": c.params}
	for k, v := range extra {
		data[k] = v
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", invalid("template " + t.Name() + " fails: " + c.redact(trimTemplateErr(err)))
	}
	return b.String(), nil
}

// call is one request.
type call struct {
	op     *Op
	method string // the default when op.Method is empty
	id     string
	idem   string
	// handle names a delivery log entry (resend's {{.Handle}}).
	handle string
	body   []byte
	query  url.Values
	// rawURL replaces the op's URL (a Link header's next page).
	rawURL  string
	already []Match
	// later are answers that mean "not now" (recover.redeliver.resend.retryLater): Transient.
	later []Match
	// secret is a signing secret in the body: an answer that echoes it must not show it.
	secret string
}

// response is a successful answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) do(ctx context.Context, k call) (*response, error) {
	res, err := c.send(ctx, k)
	var pe *providers.Error
	if k.secret != "" && errors.As(err, &pe) {
		pe.Message = strings.ReplaceAll(pe.Message, k.secret, "[redacted]")
	}
	return res, err
}

func (c *Client) send(ctx context.Context, k call) (*response, error) {
	extra := map[string]string{"ID": k.id, "IdempotencyKey": k.idem, "Handle": k.handle}
	target := k.rawURL
	if target == "" {
		path, err := c.render(k.op.Path, extra)
		if err != nil {
			return nil, err
		}
		target = c.base + path
	}
	method := k.op.Method
	if method == "" {
		method = k.method
	}
	req := c.http.R().SetContext(ctx)
	q := url.Values{}
	if k.rawURL == "" {
		for name, tv := range k.op.Query {
			v, err := c.render(tv, extra)
			if err != nil {
				return nil, err
			}
			q.Set(name, v)
		}
	}
	for name, vs := range k.query {
		q[name] = vs
	}
	if len(q) > 0 {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + q.Encode()
	}
	for _, hs := range []map[string]string{c.c.p.Headers, k.op.Headers} {
		for name, tv := range hs {
			v, err := c.render(tv, extra)
			if err != nil {
				return nil, err
			}
			req.SetHeader(name, v)
		}
	}
	auth, err := c.render(c.c.p.Auth.Value, map[string]string{"Credential": c.cred})
	if err != nil {
		return nil, err
	}
	req.SetHeader(c.c.p.Auth.Header, auth)
	if req.Header.Get("Accept") == "" {
		req.SetHeader("Accept", "application/json")
	}
	if k.body != nil {
		req.SetHeader("Content-Type", "application/json").SetBody(k.body)
	}
	res, err := req.Execute(method, target)
	if err != nil {
		if errors.Is(err, resty.ErrResponseBodyTooLarge) {
			return nil, &providers.Error{Kind: providers.Permanent, Message: fmt.Sprintf("%s %s: the response is larger than %d bytes (limits.maxResponseBytes)", method, c.where(target), c.maxBytes)}
		}
		if res != nil && res.StatusCode() >= 300 && res.StatusCode() < 400 {
			return nil, c.failure(method, target, res.StatusCode(), res.Header(), res.Body(), k)
		}
		return nil, &providers.Error{Kind: providers.Transient, Message: c.redact(fmt.Sprintf("%s %s: request failed: %v", method, c.where(target), err))}
	}
	status := res.StatusCode()
	if !c.success(k.op, status) {
		return nil, c.failure(method, target, status, res.Header(), res.Body(), k)
	}
	body := res.Body()
	if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		return nil, &providers.Error{Kind: providers.Permanent, StatusCode: status, Message: fmt.Sprintf("%s %s answered %d with %s, not JSON: check the profile's baseURL and paths", method, c.where(target), status, describeBody(res.Header(), body))}
	}
	return &response{status: status, header: res.Header(), body: body}, nil
}

// where is a request URL for messages: path and query, without the host (which may carry
// nothing secret, but is noise).
func (c *Client) where(target string) string {
	if u, err := url.Parse(target); err == nil {
		return c.redact(u.RequestURI())
	}
	return "request"
}

func (c *Client) success(op *Op, status int) bool {
	if len(op.Success) > 0 {
		return slices.Contains(op.Success, status)
	}
	return status >= 200 && status < 300
}

func describeBody(h http.Header, body []byte) string {
	ct := h.Get("Content-Type")
	trimmed := bytes.TrimSpace(body)
	if strings.Contains(ct, "html") || bytes.HasPrefix(trimmed, []byte("<")) {
		return "an HTML page"
	}
	if ct == "" {
		return "a body that is not JSON"
	}
	return "a " + ct + " body"
}

// failure classifies an answer that is not a success.
func (c *Client) failure(method, target string, status int, h http.Header, body []byte, k call) error {
	already := k.already
	em := c.c.p.Errors
	out := &providers.Error{StatusCode: status, Message: c.message(method, target, status, h, body)}
	if em.RequestIDHeader != "" {
		out.RequestID = h.Get(em.RequestIDHeader)
	}
	rl := em.RateLimit
	limited := slices.Contains(rl.Status, status) || (len(rl.Status) == 0 && status == http.StatusTooManyRequests)
	if !limited && status == http.StatusForbidden && rl.RemainingHeader != "" && strings.TrimSpace(h.Get(rl.RemainingHeader)) == "0" {
		limited = true
	}
	switch {
	case limited:
		// Without a stated wait RetryAfter stays zero: the reconciler backs off by the
		// profile's errors.rateLimit.backoff (Capabilities.RateLimitBackoff).
		out.Kind = providers.RateLimited
		out.RetryAfter = c.retryAfter(h)
	case matchAny(already, status, body):
		out.Kind = providers.AlreadyExists
	case matchAny(em.Quota, status, body):
		out.Kind = providers.QuotaExceeded
	case matchAny(k.later, status, body):
		out.Kind = providers.Transient
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		out.Kind = providers.Unauthorized
	case status == http.StatusNotFound || status == http.StatusGone:
		out.Kind = providers.NotFound
	case status >= 300 && status < 400:
		out.Kind = providers.Permanent
		out.Message = fmt.Sprintf("%s %s was redirected (%d): check the profile's baseURL", method, c.where(target), status)
	case status == http.StatusRequestTimeout || status == http.StatusConflict && len(already) == 0:
		out.Kind = providers.Transient
	case status >= 400 && status < 500:
		out.Kind = providers.Permanent
	default:
		out.Kind = providers.Transient
	}
	return out
}

func matchAny(ms []Match, status int, body []byte) bool {
	for _, m := range ms {
		if m.Status == status && (m.Contains == "" || bytes.Contains(bytes.ToLower(body), []byte(strings.ToLower(m.Contains)))) {
			return true
		}
	}
	return false
}

// maxMessage bounds the provider's message shown to users.
const maxMessage = 300

func (c *Client) message(method, target string, status int, h http.Header, body []byte) string {
	prefix := fmt.Sprintf("%s %s", method, c.where(target))
	if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		return prefix + ": " + describeBody(h, body)
	}
	for _, p := range c.c.p.Errors.Message {
		if r := gjson.GetBytes(body, p); r.Exists() && r.String() != "" {
			msg := r.String()
			if r.IsArray() || r.IsObject() {
				msg = r.Raw
			}
			return prefix + ": " + truncate(c.redact(msg))
		}
	}
	if len(bytes.TrimSpace(body)) > 0 {
		return prefix + ": " + truncate(c.redact(string(body)))
	}
	return prefix + ": " + http.StatusText(status)
}

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage] + "…"
	}
	return s
}

// retryAfter reads the wait the API asked for: Retry-After (seconds or an HTTP date), else
// the reset header.
func (c *Client) retryAfter(h http.Header) time.Duration {
	rl := c.c.p.Errors.RateLimit
	name := rl.RetryAfterHeader
	if name == "" {
		name = "Retry-After"
	}
	if wait, ok := providers.ParseRetryAfter(h.Get(name), c.now()); ok {
		return wait
	}
	if rl.ResetHeader != "" {
		if v := strings.TrimSpace(h.Get(rl.ResetHeader)); v != "" {
			if secs, err := parseSeconds(v); err == nil {
				if rl.ResetEpoch {
					return max(time.Unix(int64(secs/time.Second), 0).Sub(c.now()), 0)
				}
				return secs
			}
		}
	}
	return 0
}

func parseSeconds(v string) (time.Duration, error) {
	var n int64
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || fmt.Sprint(n) != v || n < 0 {
		return 0, errors.New("not seconds")
	}
	return time.Duration(n) * time.Second, nil
}

// redact removes the credential from s.
func (c *Client) redact(s string) string {
	if c.cred == "" {
		return s
	}
	return strings.ReplaceAll(s, c.cred, "[redacted]")
}

func invalid(msg string) error {
	return &providers.Error{Kind: providers.Permanent, Message: msg}
}
