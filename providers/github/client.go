package github

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/hookwarden/hookwarden/providers"
)

// DefaultAPIURL is github.com's REST API; GitHub Enterprise Server serves it at https://HOST/api/v3.
const DefaultAPIURL = "https://api.github.com"

// DefaultTimeout bounds one HTTP request when Config.Timeout is zero.
const DefaultTimeout = 20 * time.Second

// APIVersion is the REST API version the client speaks (X-GitHub-Api-Version).
const APIVersion = "2022-11-28"

const (
	perPage = 100 // GitHub's maximum
	// maxPages bounds one List: 100 pages of 100 hooks is far past GitHub's 20 hooks per
	// event, so more means a server that keeps answering rel="next".
	maxPages     = 100
	maxBodyBytes = 8 << 20
)

// Client manages the hooks of one repository or organization. It is safe for concurrent use.
type Client struct {
	rc     *resty.Client
	base   *url.URL
	target string // "repos/<owner>/<repo>" or "orgs/<org>"
	org    bool
	token  string
	now    func() time.Time
	caps   providers.Capabilities

	// app authenticates as a GitHub App (app.go); nil for repository and organization hooks.
	app *appAuth

	mu sync.Mutex
	// pages remembers each list page's ETag and decoded hooks from the last complete List, by
	// page URL, so the next List sends If-None-Match and reuses the page on a 304, which
	// GitHub does not charge to the rate limit.
	pages map[string]cachedPage
}

type cachedPage struct {
	etag string
	regs []providers.Registration
	next string
}

var (
	_ providers.Client = (*Client)(nil)
	_ providers.Pinger = (*Client)(nil)
)

// capabilities: GitHub hooks carry no metadata (no marker, no description), the client chooses
// the secret and must resend it on every update (GitHub removes a secret a config omits), and
// there is no idempotency key.
var capabilities = providers.Capabilities{
	Markers:           false,
	Secret:            providers.SecretClientChosen,
	UpdateNeedsSecret: true,
	ReplayableCreate:  false,
	Fields:            providers.FieldDisabled,
	Rate:              documentedRate,
	RateLimitBackoff:  secondaryBackoff,
}

// secondaryBackoff is GitHub's rule for a secondary rate limit that names no wait (PROVIDERS.md
// §2.2, docs.github.com "Rate limits for the REST API"): at least a minute, then exponentially
// longer. The primary limit always states its wait (x-ratelimit-reset), and so does a secondary
// one with retry-after or remaining 0. The cap is a quarter of the longest secondary window
// (500 content-creating requests an hour): past the per-minute limits, four tries an hour
// cost GitHub nothing and find a reset hourly window within 15 minutes.
var secondaryBackoff = providers.Backoff{First: time.Minute, Factor: 2, Max: 15 * time.Minute}

// documentedRate keeps one token under GitHub's limits (PROVIDERS.md §2.2): the secondary limit
// of 80 content-creating requests a minute binds first (a hook create and its ping are both
// POSTs), so 1.2/s with a burst of 8 makes at most 80 in any first minute, and 4,320 an hour,
// under the primary 5,000. A longer create storm meets the 500-an-hour secondary limit, which
// GitHub answers with retry-after and the manager waits out.
var documentedRate = providers.Rate{PerSecond: 1.2, Burst: 8}

// Capabilities says what GitHub can promise; Recovery's window depends on the API URL (github.com
// 3 days, GitHub Enterprise Server 7).
func (c *Client) Capabilities() providers.Capabilities { return c.caps }

// Factory returns a providers.Factory that builds GitHub clients: NewApp for a target
// "app/<App ID or client ID>", New for repository and organization hooks.
func Factory() providers.Factory {
	hooks, app := providers.FactoryOf(New), providers.FactoryOf(NewApp)
	return providers.FactoryFunc(func(cfg providers.Config) (providers.Client, error) {
		if strings.HasPrefix(cfg.Target, "app/") {
			return app.New(cfg)
		}
		return hooks.New(cfg)
	})
}

// New builds a Client for cfg.Target ("repos/<owner>/<repository>" or "orgs/<organization>")
// with the token cfg.Credential. cfg.APIURL overrides https://api.github.com (GitHub
// Enterprise Server: https://HOST/api/v3; fakes); cfg.Timeout defaults to DefaultTimeout.
// Configuration errors are *providers.Error of kind Permanent.
func New(cfg providers.Config) (*Client, error) {
	tok := cfg.Credential
	if err := providers.CheckCredential("github token", cfg.Credential); err != nil {
		return nil, err
	}
	target, org, err := parseTarget(cfg.Target)
	if err != nil {
		return nil, err
	}
	c, err := newClient(cfg, target)
	if err != nil {
		return nil, err
	}
	c.rc.SetAuthToken(tok)
	c.org, c.token = org, tok
	return c, nil
}

// newClient is a Client for target without credentials: New adds a token, NewApp an App's JWT.
func newClient(cfg providers.Config, target string) (*Client, error) {
	raw := DefaultAPIURL
	if cfg.APIURL != "" {
		raw = strings.TrimRight(cfg.APIURL, "/")
	}
	base, err := url.Parse(raw)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" ||
		base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, invalid("github API URL must be an absolute http(s) URL without credentials, query or fragment (GitHub Enterprise Server: https://HOST/api/v3)")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}

	rc := resty.New().
		SetBaseURL(base.String()).
		SetHeader("Accept", "application/vnd.github+json").
		SetHeader("X-GitHub-Api-Version", APIVersion).
		SetHeader("User-Agent", providers.UserAgent()).
		SetTimeout(timeout).
		// The reconciler owns retries and backoff.
		SetRetryCount(0).
		// A redirect is reported, not followed: a 301 on a renamed repository would turn a
		// POST into a GET, and the token must not travel to another host.
		SetRedirectPolicy(resty.RedirectPolicyFunc(func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse })).
		SetResponseBodyLimit(maxBodyBytes).
		SetDisableWarn(true).
		SetLogger(providers.QuietLogger{})
	if t := cfg.Transport(); t != nil {
		rc.SetTransport(t)
	}
	caps := capabilities
	caps.Recovery = recovery(base.Path)
	return &Client{rc: rc, base: base, target: target, now: cfg.Clock(), caps: caps, pages: map[string]cachedPage{}}, nil
}

// parseTarget validates "repos/<owner>/<repository>" or "orgs/<organization>".
func parseTarget(t string) (string, bool, error) {
	parts := strings.Split(t, "/")
	switch {
	case len(parts) == 3 && parts[0] == "repos":
		if !validOwner(parts[1]) {
			return "", false, invalid(fmt.Sprintf("github target %q: %q is not a GitHub owner name", t, parts[1]))
		}
		if !validRepository(parts[2]) {
			return "", false, invalid(fmt.Sprintf("github target %q: %q is not a GitHub repository name", t, parts[2]))
		}
		return t, false, nil
	case len(parts) == 2 && parts[0] == "orgs":
		if !validLogin(parts[1]) {
			return "", false, invalid(fmt.Sprintf("github target %q: %q is not a GitHub organization name", t, parts[1]))
		}
		return t, true, nil
	}
	return "", false, invalid(fmt.Sprintf("github target %q must be repos/<owner>/<repository> or orgs/<organization>", t))
}

// wireHook is the part of GitHub's hook object the client reads, each field kept raw so that
// one field of an unexpected shape spoils only itself (decodeHook).
type wireHook struct {
	ID           json.RawMessage `json:"id"`
	Active       json.RawMessage `json:"active"`
	Events       json.RawMessage `json:"events"`
	CreatedAt    json.RawMessage `json:"created_at"`
	Config       json.RawMessage `json:"config"`
	LastResponse json.RawMessage `json:"last_response"`
}

type wireConfig struct {
	URL         json.RawMessage `json:"url"`
	ContentType json.RawMessage `json:"content_type"`
	InsecureSSL json.RawMessage `json:"insecure_ssl"`
}

type wireResponse struct {
	Code    *int    `json:"code"`
	Status  *string `json:"status"`
	Message *string `json:"message"`
}

// absent is a field the object lacks or holds null.
func absent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// reported is a config value as GitHub reported it, for a message: a string's text, or the JSON.
func reported(raw json.RawMessage) string {
	var s string
	switch {
	case absent(raw):
		return "(none)"
	case json.Unmarshal(raw, &s) == nil:
		return s
	}
	return string(raw)
}

// decodeHook reads one hook object as far as it fits and returns, as problems, what does not
// (field paths, never values): a hook of a retired GitHub Service has a config without url, a
// tool may leave events null. null for a flag (active) reads as false; insecure_ssl may be a
// string or a number, as GitHub's description allows; last_response may be null or of another
// shape, which only drops the delivery report.
//
//nolint:funlen // one field per block, each with the shape GitHub may send
func decodeHook(raw json.RawMessage) (providers.Registration, []string) {
	var r providers.Registration
	var problems []string
	var h wireHook
	if err := json.Unmarshal(raw, &h); err != nil {
		return r, []string{"the hook is not a JSON object"}
	}
	var id int64
	switch {
	case len(h.ID) == 0:
		problems = append(problems, "id is missing")
	case json.Unmarshal(h.ID, &id) != nil || id <= 0:
		problems = append(problems, "id is not a positive integer")
	default:
		r.ID = strconv.FormatInt(id, 10)
	}
	var active bool
	switch {
	case len(h.Active) == 0:
		problems = append(problems, "active is missing")
	case string(h.Active) == "null":
	case json.Unmarshal(h.Active, &active) != nil:
		problems = append(problems, "active is not a boolean")
	}
	r.Disabled = !active
	switch {
	case len(h.Events) == 0:
		problems = append(problems, "events is missing")
	case string(h.Events) == "null":
		problems = append(problems, "events is null")
	case json.Unmarshal(h.Events, &r.Events) != nil:
		r.Events = nil
		problems = append(problems, "events is not an array of strings")
	}
	var created string
	if json.Unmarshal(h.CreatedAt, &created) == nil {
		if t, err := time.Parse(time.RFC3339, created); err == nil {
			r.Created = t.UTC()
		}
	}
	var cfg wireConfig
	switch {
	case absent(h.Config):
		problems = append(problems, "config is missing")
	case json.Unmarshal(h.Config, &cfg) != nil:
		problems = append(problems, "config is not an object")
	default:
		switch {
		case absent(cfg.URL):
			problems = append(problems, "config.url is missing")
		case json.Unmarshal(cfg.URL, &r.URL) != nil:
			problems = append(problems, "config.url is not a string")
		}
		var ct string
		if json.Unmarshal(cfg.ContentType, &ct) != nil || ct != "json" {
			r.Reconfigure("content_type", reported(cfg.ContentType), "json")
		}
		var ssl flexString
		switch {
		case absent(cfg.InsecureSSL):
			r.Reconfigure("insecure_ssl", reported(cfg.InsecureSSL), "0")
		case json.Unmarshal(cfg.InsecureSSL, &ssl) != nil:
			problems = append(problems, "config.insecure_ssl is neither a string nor a number")
		case ssl != "0":
			r.Reconfigure("insecure_ssl", string(ssl), "0")
		}
	}
	var lr *wireResponse
	if !absent(h.LastResponse) && json.Unmarshal(h.LastResponse, &lr) == nil && lr != nil {
		d := &providers.DeliveryReport{}
		if lr.Code != nil {
			d.Code = *lr.Code
		}
		if lr.Status != nil {
			d.Status = *lr.Status
		}
		if lr.Message != nil {
			d.Message = *lr.Message
		}
		r.LastDelivery = d
	}
	r.Health = listHealth(r.LastDelivery)
	return r, problems
}

// flexString decodes a JSON string or number: GitHub's description allows insecure_ssl as
// either.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("insecure_ssl is neither a string nor a number")
	}
	*f = flexString(n.String())
	return nil
}

// List returns every hook on the target, following rel="next" to the end. Each page is
// requested with If-None-Match on the ETag it had in the last complete List; a 304 reuses the
// page as decoded then. A pagination that does not end or repeats a page is a Transient error,
// never a partial list.
func (c *Client) List(ctx context.Context) ([]providers.Registration, error) {
	c.mu.Lock()
	old := c.pages
	c.mu.Unlock()

	fresh := map[string]cachedPage{}
	seen := map[string]bool{}
	u := c.base.String() + c.hooksPath() + "?per_page=" + strconv.Itoa(perPage)
	var regs []providers.Registration
	for n := 0; ; n++ {
		if n == maxPages {
			return nil, &providers.Error{Kind: providers.Transient, Message: fmt.Sprintf("list pagination did not end after %d pages", maxPages)}
		}
		if seen[u] {
			return nil, &providers.Error{Kind: providers.Transient, Message: "list pagination repeated a page: " + c.redact(u)}
		}
		seen[u] = true

		req := c.rc.R().SetContext(ctx)
		cached, haveCached := old[u]
		if haveCached && cached.etag != "" {
			req.SetHeader("If-None-Match", cached.etag)
		}
		resp, err := req.Get(u)
		if err != nil {
			return nil, c.networkError(err)
		}
		var page cachedPage
		switch {
		case resp.StatusCode() == http.StatusNotModified && haveCached:
			page = cached
			// The 304 may carry the current Link; the cached one is the fallback.
			if resp.Header().Get("Link") != "" {
				page.next = providers.ParseLinks(resp.Header().Values("Link"))["next"]
			}
		case resp.StatusCode() == http.StatusOK:
			// Items are decoded one by one: a hook of an unexpected shape is listed with
			// Unfit set, instead of failing the page and every subscription on the target.
			var hooks []json.RawMessage
			if err := json.Unmarshal(resp.Body(), &hooks); err != nil {
				return nil, c.classify(resp, opList)
			}
			page = cachedPage{etag: resp.Header().Get("ETag"), next: providers.ParseLinks(resp.Header().Values("Link"))["next"]}
			for _, raw := range hooks {
				reg, problems := decodeHook(raw)
				reg.Unfit = strings.Join(problems, "; ")
				page.regs = append(page.regs, reg)
			}
		default:
			return nil, c.classify(resp, opList)
		}
		fresh[u] = page
		for _, r := range page.regs {
			regs = append(regs, cloneRegistration(r))
		}
		if page.next == "" {
			break
		}
		if u, err = c.resolve(u, page.next); err != nil {
			return nil, err
		}
	}

	c.mu.Lock()
	c.pages = fresh
	c.mu.Unlock()
	return regs, nil
}

// resolve makes a Link reference absolute (relative to the page that sent it, as RFC 8288
// says) and refuses one that leaves the API: the request carries the token.
func (c *Client) resolve(current, ref string) (string, error) {
	cur, err1 := url.Parse(current)
	r, err2 := url.Parse(ref)
	if err1 != nil || err2 != nil {
		return "", &providers.Error{Kind: providers.Transient, Message: "GitHub sent an unreadable Link rel=\"next\""}
	}
	u := cur.ResolveReference(r)
	if u.Scheme != c.base.Scheme || !strings.EqualFold(u.Host, c.base.Host) {
		return "", &providers.Error{Kind: providers.Transient, Message: "GitHub's Link rel=\"next\" points to another host (" + u.Host + "); not following it with the token"}
	}
	return u.String(), nil
}

func cloneRegistration(r providers.Registration) providers.Registration {
	r.Events = slices.Clone(r.Events)
	r.Misconfigured = slices.Clone(r.Misconfigured)
	r.Reconfigures = maps.Clone(r.Reconfigures)
	if r.LastDelivery != nil {
		d := *r.LastDelivery
		r.LastDelivery = &d
	}
	if r.Health != nil {
		h := *r.Health
		r.Health = &h
	}
	return r
}

type hookConfig struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
	InsecureSSL string `json:"insecure_ssl"`
	Secret      string `json:"secret"`
}

type createBody struct {
	Name   string     `json:"name"`
	Active bool       `json:"active"`
	Events []string   `json:"events"`
	Config hookConfig `json:"config"`
}

type updateBody struct {
	Active bool       `json:"active"`
	Events []string   `json:"events"`
	Config hookConfig `json:"config"`
}

// config is what every create and update sends: JSON payloads (the signature then covers the
// JSON body the receiver parses), TLS verified, and the secret, which GitHub removes when a
// config omits it.
func config(d providers.Desired) hookConfig {
	return hookConfig{URL: d.URL, ContentType: "json", InsecureSSL: "0", Secret: d.Secret}
}

// Create registers a hook. idempotencyKey is ignored: GitHub has no idempotency keys (a
// second create for the same URL and events is refused as AlreadyExists instead).
func (c *Client) Create(ctx context.Context, d providers.Desired, _ string) (providers.Registration, error) {
	if err := validate(d); err != nil {
		return providers.Registration{}, err
	}
	body := createBody{Name: "web", Active: !d.Disabled, Events: canonicalEvents(d.Events), Config: config(d)}
	resp, err := c.rc.R().SetContext(ctx).SetBody(body).Post(c.hooksPath())
	if err != nil {
		return providers.Registration{}, c.networkError(err)
	}
	return c.hookResponse(resp, http.StatusCreated, opCreate)
}

// Update sets URL, events, active and the secret of hook id, and repairs content_type and
// insecure_ssl (the config is sent whole every time).
func (c *Client) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	if err := checkID(id); err != nil {
		return providers.Registration{}, err
	}
	if err := validate(d); err != nil {
		return providers.Registration{}, err
	}
	body := updateBody{Active: !d.Disabled, Events: canonicalEvents(d.Events), Config: config(d)}
	resp, err := c.rc.R().SetContext(ctx).SetBody(body).Patch(c.hooksPath() + "/" + id)
	if err != nil {
		return providers.Registration{}, c.networkError(err)
	}
	return c.hookResponse(resp, http.StatusOK, opUpdate)
}

// Delete removes hook id; a hook that is already gone (404) is not an error.
func (c *Client) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	resp, err := c.rc.R().SetContext(ctx).Delete(c.hooksPath() + "/" + id)
	if err != nil {
		return c.networkError(err)
	}
	if resp.StatusCode() == http.StatusNoContent {
		return nil
	}
	if err := c.classify(resp, opDelete); !providers.IsNotFound(err) {
		return err
	}
	return nil
}

// Ping asks GitHub to send a ping delivery to hook id; its outcome appears later as the hook's
// last_response (Registration.LastDelivery).
func (c *Client) Ping(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	resp, err := c.rc.R().SetContext(ctx).Post(c.hooksPath() + "/" + id + "/pings")
	if err != nil {
		return c.networkError(err)
	}
	if resp.StatusCode() == http.StatusNoContent {
		return nil
	}
	return c.classify(resp, opPing)
}

func (c *Client) hookResponse(resp *resty.Response, want int, op operation) (providers.Registration, error) {
	if resp.StatusCode() != want {
		return providers.Registration{}, c.classify(resp, op)
	}
	reg, problems := decodeHook(resp.Body())
	if reg.ID == "" {
		return providers.Registration{}, &providers.Error{Kind: providers.Transient, StatusCode: resp.StatusCode(),
			Message: "GitHub answered HTTP " + strconv.Itoa(resp.StatusCode()) + " without a hook object", RequestID: resp.Header().Get("X-GitHub-Request-Id")}
	}
	if len(problems) > 0 {
		// The hook exists: its id is returned with the error, so it is not lost.
		return reg, &providers.Error{Kind: providers.Permanent, StatusCode: resp.StatusCode(),
			Message: "GitHub's hook " + reg.ID + " does not fit: " + strings.Join(problems, "; "), RequestID: resp.Header().Get("X-GitHub-Request-Id")}
	}
	return reg, nil
}

func (c *Client) hooksPath() string { return "/" + c.target + "/hooks" }

// hookPath is hook id's path; a GitHub App's one webhook has no id of its own (/app/hook).
func (c *Client) hookPath(id string) string {
	if c.app != nil {
		return "/app/hook"
	}
	return c.hooksPath() + "/" + id
}

// checkID refuses an id that names no hook of this client before any request.
func (c *Client) checkID(id string) error {
	if c.app != nil {
		if id != AppHookID {
			return invalid(fmt.Sprintf("a GitHub App's webhook is %q, not %q", AppHookID, id))
		}
		return nil
	}
	return checkID(id)
}

// canonicalEvents sends events sorted and without repeats, so a request does not depend on
// the order a list returned them in.
func canonicalEvents(events []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(events)))
}

func validate(d providers.Desired) error {
	switch {
	case d.URL == "":
		return invalid("webhook URL is empty")
	case !absoluteHTTP(d.URL):
		return invalid("webhook URL must be an absolute http(s) URL")
	case len(d.Events) == 0:
		return invalid("at least one event is required (\"*\" for all)")
	case d.Secret == "":
		// Without it GitHub would deliver unsigned, or remove the secret an update omits.
		return invalid("the signing secret is empty: GitHub hooks are created and updated with the secret the operator chose")
	}
	return nil
}

func absoluteHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func checkID(id string) error {
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 || strconv.FormatInt(n, 10) != id {
		return invalid(fmt.Sprintf("github hook id %q is not a positive decimal integer", id))
	}
	return nil
}
