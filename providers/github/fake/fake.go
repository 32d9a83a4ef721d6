// Package fake is a stateful, in-process stand-in for GitHub's repository and organization
// webhook API (/repos/{owner}/{repo}/hooks..., /orgs/{org}/hooks...).
//
// It speaks the wire format GitHub's OpenAPI description gives for those endpoints (JSON
// bodies, integer hook ids, insecure_ssl as a string, secrets masked as "********", Link
// paging, ETag and If-None-Match, the rate-limit headers and GitHub's error envelopes), closely
// enough that go-github and the operator's resty client can be pointed at it. A test plays the
// part of GitHub's users with Grant, Seed, Edit and Remove, of a flaky network or a rate limiter
// with Inject, and counts what the operator did with Requests and Stats.
//
// Tokens are the principals: a token is known once it is granted something, and sees only the
// repositories and organizations it was granted (everything else is 404, as on GitHub). Each
// token has its own rate-limit budget. Hooks belong to targets ("repos/<owner>/<repo>",
// "orgs/<org>"), which are created on first mention; names are case-insensitive.
//
// With WithDeliveries the fake also delivers like GitHub: a signed ping to config.url after a
// create and on POST .../pings, recording the outcome as the hook's last_response. Deliver
// sends any event to one hook on demand, Emit to every hook of a target subscribed to it. Every
// delivery is kept in its hook's delivery log, which GET .../deliveries lists (newest first,
// cursor-paged), GET .../deliveries/{delivery_id} shows with its request and response, and POST
// .../deliveries/{delivery_id}/attempts redelivers (same guid, fresh signature) within the
// redelivery window of the fake's clock (3 days, WithRedeliveryWindow).
package fake

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// Defaults follow github.com.
const (
	// DefaultHookCap is GitHub's limit of hooks per event on one repository or organization.
	DefaultHookCap = 20
	// DefaultRateLimit is a personal access token's primary budget per hour.
	DefaultRateLimit = 5000
	// MaskedSecret is how GitHub shows a configured secret.
	MaskedSecret = "********"
	// DefaultPerPage and MaxPerPage bound list pages as GitHub documents.
	DefaultPerPage = 30
	MaxPerPage     = 100
)

// rateWindow is the length of GitHub's primary rate-limit window.
const rateWindow = time.Hour

// Server is the fake GitHub API. It is an http.Handler; all methods are safe for concurrent use.
type Server struct {
	clock    fakeapi.Clock
	faults   fakeapi.Faults[Fault]
	chaos    *fakeapi.Chaos
	meter    *fakeapi.Meter
	requests *fakeapi.Log[Request]
	sent     *fakeapi.Log[Delivery]
	inflight sync.WaitGroup

	// Set by options before the Server is used.
	pageSize    int
	hookCap     int
	rateLimit   int
	limitStatus int
	deliveries  bool
	httpClient  *http.Client

	mu         sync.Mutex
	targets    map[string]*target // by lower-case key "repos/o/r", "orgs/o", "app/<id>"
	apps       map[string]*app    // by App id and client ID (app.go)
	tokens     map[string]*token
	nextHookID int64
	nextTarget int64
	// logs are the hooks' delivery logs, by hook id (ids are unique across targets).
	logs           map[int64][]Delivery
	nextDeliveryID int64
	window         time.Duration
}

// Option configures a Server at construction.
type Option func(*Server)

// WithPageSize caps every list page at n items whatever per_page asks for, so tests can force
// many pages although clients ask for 100. n <= 0 means no cap beyond GitHub's 100.
func WithPageSize(n int) Option { return func(s *Server) { s.pageSize = n } }

// WithHookCap sets how many hooks one target may have per event (default 20, GitHub's limit).
func WithHookCap(n int) Option { return func(s *Server) { s.hookCap = n } }

// WithRateLimit sets each token's primary budget per hour (default 5000).
func WithRateLimit(perHour int) Option { return func(s *Server) { s.rateLimit = perHour } }

// WithRateLimitStatus sets the status of a primary rate-limit refusal: 403 (the default) or
// 429; GitHub documents both.
func WithRateLimitStatus(status int) Option { return func(s *Server) { s.limitStatus = status } }

// WithDeliveries makes the fake deliver a ping to config.url after each create and on POST
// .../pings, as GitHub does, and record the outcome as last_response. Off by default, so tests
// that do not want outbound HTTP do not get it. client nil uses a client with GitHub's 10 s
// delivery timeout.
func WithDeliveries(client *http.Client) Option {
	return func(s *Server) {
		s.deliveries = true
		if client != nil {
			s.httpClient = client
		}
	}
}

// RedeliveryWindow is how long after its first delivery an event can be redelivered on
// github.com (docs.github.com "Redelivering webhooks": "deliveries from the past 3 days"; 7 days
// on GitHub Enterprise Server, see WithRedeliveryWindow).
const RedeliveryWindow = 72 * time.Hour

// WithRedeliveryWindow sets how long after its first delivery an event can be redelivered
// (default RedeliveryWindow; GitHub Enterprise Server: 7 days). The delivery log itself keeps
// every delivery: older ones are listed, and POST .../attempts refuses them with 422.
func WithRedeliveryWindow(d time.Duration) Option { return func(s *Server) { s.window = d } }

// WithMeter paces and counts the fake's requests (see fakeapi.Meter): a token beyond the
// meter's rate gets GitHub's secondary rate-limit answer (the primary status, 403 unless
// WithRateLimitStatus, with retry-after), on top of the hourly primary limit.
func WithMeter(m *fakeapi.Meter) Option { return func(s *Server) { s.meter = m } }

// WithClock sets the clock used for timestamps and rate-limit windows; see SetClock.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.clock.Set(now) } }

// New returns a Server with no tokens and no targets.
func New(opts ...Option) *Server {
	s := &Server{
		requests:    fakeapi.NewLog(Request.clone),
		sent:        fakeapi.NewLog(Delivery.clone),
		logs:        map[int64][]Delivery{},
		window:      RedeliveryWindow,
		hookCap:     DefaultHookCap,
		rateLimit:   DefaultRateLimit,
		limitStatus: http.StatusForbidden,
		targets:     map[string]*target{},
		apps:        map[string]*app{},
		tokens:      map[string]*token{},
		nextHookID:  500000000,
		nextTarget:  1000,
		// GitHub's delivery ids outgrew 32 bits long ago.
		nextDeliveryID: 40000000000,
	}
	s.faults.FoldCase = true
	for _, o := range opts {
		o(s)
	}
	if s.httpClient == nil {
		s.httpClient = &http.Client{
			Timeout: 10 * time.Second,
			// GitHub does not follow redirects: a 3xx is a failed delivery.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return s
}

// Start serves s on a fresh 127.0.0.1 port and returns its base URL (the API root, like
// https://api.github.com) and a function that stops it and waits for deliveries in flight.
func (s *Server) Start() (baseURL string, stop func()) {
	base, stopHTTP := fakeapi.Start(s)
	return base, func() {
		stopHTTP()
		s.WaitDeliveries()
	}
}

// SetClock replaces the clock (nil restores time.Now). now is called with the Server's lock
// held, so it must not call back into s.
func (s *Server) SetClock(now func() time.Time) { s.clock.Set(now) }

func (s *Server) now() time.Time { return s.clock.Now().UTC().Truncate(time.Second) }

// Hook is the fake's stored state of one webhook. Unlike the API it carries the real secret,
// so tests can check what the operator set.
type Hook struct {
	ID     int64    `json:"id"`
	Active bool     `json:"active"`
	Events []string `json:"events"`
	Config Config   `json:"config"`
	// CreatedAt and UpdatedAt are whole seconds, UTC, as GitHub reports them.
	CreatedAt    time.Time    `json:"created_at"`
	UpdatedAt    time.Time    `json:"updated_at"`
	LastResponse LastResponse `json:"last_response"`
	// Quirks change how the hook is rendered, as GitHub renders hooks it did not make the way
	// this fake makes them (see LegacyServiceHook): the stored state is untouched.
	Quirks []fakeapi.Quirk `json:"quirks,omitempty"`
}

// LegacyServiceHook is a hook of a retired GitHub Service (name "travis"), as the hooks API
// rendered them: a config of the service's own fields, without url; insecure_ssl absent and
// last_response null.
func LegacyServiceHook() Hook {
	return Hook{Active: true, Events: []string{"push", "pull_request"}, Quirks: []fakeapi.Quirk{
		{Path: "name", Value: []byte(`"travis"`)},
		{Path: "config", Value: []byte(`{"domain":"notify.travis-ci.org","user":"octocat","token":"********"}`)},
		{Path: "last_response", Value: []byte("null")},
	}}
}

// Config is a hook's config object.
type Config struct {
	URL string `json:"url"`
	// ContentType is "json" or "form".
	ContentType string `json:"content_type"`
	// InsecureSSL is "0" (verify TLS) or "1".
	InsecureSSL string `json:"insecure_ssl"`
	// Secret is the signing secret, "" for none. The API only ever shows "********".
	Secret string `json:"secret,omitempty"`
}

// LastResponse is GitHub's account of the latest delivery: Status "unused" before the first.
// It is kept for every hook but sent only on repository hooks, as GitHub's description has it.
type LastResponse struct {
	Code    int    `json:"code,omitempty"` // 0 is null on the wire
	Status  string `json:"status"`
	Message string `json:"message,omitempty"` // "" is null on the wire
}

func (h Hook) clone() Hook {
	h.Quirks = fakeapi.CloneQuirks(h.Quirks)
	h.Events = slices.Clone(h.Events)
	if h.Events == nil {
		h.Events = []string{}
	}
	return h
}

// Kind of a target.
const (
	KindRepository   = "Repository"
	KindOrganization = "Organization"
)

type target struct {
	kind  string // KindRepository or KindOrganization
	owner string // repository owner, or the organization, as first mentioned
	repo  string // "" for organizations
	id    int64  // the installation target id GitHub sends in deliveries
	hooks []*Hook
}

// access a token has to one target's hooks.
type access int

const (
	accessNone  access = iota
	accessRead         // fine-grained "Webhooks: read-only"
	accessAdmin        // can create, edit and delete hooks
)

type token struct {
	access map[string]access
	// classic tokens report their scopes in X-OAuth-Scopes and need a hook scope besides the
	// admin role; fine-grained tokens (classic false) carry permissions instead.
	classic bool
	scopes  []string
	used    int
	reset   time.Time
}

// parseTarget splits "repos/<owner>/<repo>" or "orgs/<org>" (a leading "/" is allowed).
func parseTarget(t string) (kind, owner, repo string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(t, "/"), "/")
	switch {
	case len(parts) == 3 && strings.EqualFold(parts[0], "repos") && parts[1] != "" && parts[2] != "":
		return KindRepository, parts[1], parts[2], true
	case len(parts) == 2 && strings.EqualFold(parts[0], "orgs") && parts[1] != "":
		return KindOrganization, parts[1], "", true
	case len(parts) == 2 && parts[0] == "app" && parts[1] != "":
		return KindApp, parts[1], "", true
	}
	return "", "", "", false
}

// ValidTarget reports whether t names a target: "repos/<owner>/<repo>" or "orgs/<org>".
func ValidTarget(t string) bool {
	_, _, _, ok := parseTarget(t)
	return ok
}

func targetKey(kind, owner, repo string) string {
	if kind == KindApp {
		return "app/" + owner
	}
	if kind == KindOrganization {
		return "orgs/" + strings.ToLower(owner)
	}
	return "repos/" + strings.ToLower(owner) + "/" + strings.ToLower(repo)
}

// mustTarget returns the target named t, creating it. Callers hold s.mu. It panics on a
// malformed name: callers are tests, and a typo should fail loudly.
func (s *Server) mustTarget(t string) (string, *target) {
	kind, owner, repo, ok := parseTarget(t)
	if !ok {
		panic(fmt.Sprintf("fake: target %q is neither repos/<owner>/<repo> nor orgs/<org>", t))
	}
	key := targetKey(kind, owner, repo)
	tg := s.targets[key]
	if tg == nil {
		s.nextTarget++
		tg = &target{kind: kind, owner: owner, repo: repo, id: s.nextTarget}
		s.targets[key] = tg
	}
	return key, tg
}

// lookup returns the target named t, or nil. Callers hold s.mu.
func (s *Server) lookup(t string) *target {
	kind, owner, repo, ok := parseTarget(t)
	if !ok {
		return nil
	}
	return s.targets[targetKey(kind, owner, repo)]
}

func (s *Server) tok(credential string) *token {
	tk := s.tokens[credential]
	if tk == nil {
		tk = &token{access: map[string]access{}}
		s.tokens[credential] = tk
	}
	return tk
}

// Grant lets tok administer the hooks of targets ("repos/<owner>/<repo>" or "orgs/<org>"),
// creating the targets and the token as needed.
func (s *Server) Grant(tok string, targets ...string) { s.grant(tok, accessAdmin, targets) }

// GrantRead lets tok read but not change the hooks of targets, like a fine-grained token with
// "Webhooks: read-only": writes answer 403 "Resource not accessible by personal access token".
func (s *Server) GrantRead(tok string, targets ...string) { s.grant(tok, accessRead, targets) }

// Revoke takes tok's access to targets away; the token stays known (404, not 401).
func (s *Server) Revoke(tok string, targets ...string) { s.grant(tok, accessNone, targets) }

func (s *Server) grant(credential string, a access, targets []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk := s.tok(credential)
	for _, t := range targets {
		key, _ := s.mustTarget(t)
		if a == accessNone {
			delete(tk.access, key)
		} else {
			tk.access[key] = a
		}
	}
}

// SetScopes makes tok a classic personal access token with these OAuth scopes: responses then
// carry X-OAuth-Scopes and X-Accepted-OAuth-Scopes, and hooks are reachable only with a hook
// scope (repository hooks: repo, admin:repo_hook, write:repo_hook, or read:repo_hook for reads;
// organization hooks: admin:org_hook). A classic token without one gets 404, as on GitHub.
func (s *Server) SetScopes(tok string, scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk := s.tok(tok)
	tk.classic = true
	tk.scopes = slices.Clone(scopes)
}

// ForgetToken makes tok unknown again, as after it is deleted or expires: 401 "Bad credentials".
func (s *Server) ForgetToken(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tok)
}

// RateLimit is a token's primary budget as the x-ratelimit headers would report it now.
type RateLimit struct {
	Limit, Used, Remaining int
	Reset                  time.Time
}

// RateLimit reports tok's budget (a fresh window for a token that has spent nothing).
func (s *Server) RateLimit(tok string) RateLimit {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk := s.tokens[tok]
	if tk == nil {
		return RateLimit{Limit: s.rateLimit, Remaining: s.rateLimit, Reset: s.now().Add(rateWindow)}
	}
	return s.budget(tk)
}

// SetRateLimitRemaining spends tok's budget down to remaining for the current window (0:
// every further request is refused until the reset).
func (s *Server) SetRateLimitRemaining(tok string, remaining int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk := s.tok(tok)
	s.budget(tk) // opens the window
	tk.used = max(s.rateLimit-remaining, 0)
}

// budget opens a new window when the last one has passed. Callers hold s.mu.
func (s *Server) budget(tk *token) RateLimit {
	now := s.now()
	if tk.reset.IsZero() || !now.Before(tk.reset) {
		tk.used, tk.reset = 0, now.Add(rateWindow)
	}
	return RateLimit{Limit: s.rateLimit, Used: tk.used, Remaining: max(s.rateLimit-tk.used, 0), Reset: tk.reset}
}

// Hooks returns copies of target's hooks in id order, secrets included; nil for a target the
// fake does not know.
func (s *Server) Hooks(target string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	tg := s.lookup(target)
	if tg == nil {
		return nil
	}
	out := make([]Hook, 0, len(tg.hooks))
	for _, h := range tg.hooks {
		out = append(out, h.clone())
	}
	return out
}

// Seed stores h on target out of band, as a user in GitHub's settings page would (no request
// is logged, neither the cap nor the duplicate rule is enforced), and returns what was stored.
// A zero ID is assigned; empty ContentType becomes "form" and empty InsecureSSL "0" (GitHub's
// defaults), nil Events ["push"], zero times now, and a zero LastResponse "unused". Active is
// taken as given. A hook with the same ID is replaced.
func (s *Server) Seed(target string, h Hook) Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, tg := s.mustTarget(target)
	h = h.clone()
	if h.ID == 0 {
		s.nextHookID++
		h.ID = s.nextHookID
	}
	if h.Config.ContentType == "" {
		h.Config.ContentType = "form"
	}
	if h.Config.InsecureSSL == "" {
		h.Config.InsecureSSL = "0"
	}
	if len(h.Events) == 0 {
		h.Events = []string{"push"}
	}
	now := s.now()
	if h.CreatedAt.IsZero() {
		h.CreatedAt = now
	}
	if h.UpdatedAt.IsZero() {
		h.UpdatedAt = h.CreatedAt
	}
	if h.LastResponse == (LastResponse{}) {
		h.LastResponse = LastResponse{Status: "unused"}
	}
	if i := tg.find(h.ID); i >= 0 {
		*tg.hooks[i] = h
		return h.clone()
	}
	stored := h
	tg.hooks = append(tg.hooks, &stored)
	slices.SortFunc(tg.hooks, func(a, b *Hook) int { return int(a.ID - b.ID) })
	return h.clone()
}

// Edit changes a hook out of band (drift, as if edited in GitHub's settings page) and reports
// whether it exists. fn gets a copy; the ID cannot be changed. fn runs with the Server's lock
// held, so it must not call back into s.
func (s *Server) Edit(target string, id int64, fn func(*Hook)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	tg, i := s.locate(target, id)
	if i < 0 {
		return false
	}
	c := tg.hooks[i].clone()
	fn(&c)
	c.ID = id
	*tg.hooks[i] = c.clone()
	return true
}

// Remove deletes a hook out of band and reports whether it existed.
func (s *Server) Remove(target string, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	tg, i := s.locate(target, id)
	if i < 0 {
		return false
	}
	tg.hooks = slices.Delete(tg.hooks, i, i+1)
	delete(s.logs, id)
	return true
}

// locate finds hook id on target; i is -1 when either is unknown. Callers hold s.mu.
func (s *Server) locate(target string, id int64) (tg *target, i int) {
	if tg = s.lookup(target); tg == nil {
		return nil, -1
	}
	return tg, tg.find(id)
}

func (tg *target) find(id int64) int {
	for i, h := range tg.hooks {
		if h.ID == id {
			return i
		}
	}
	return -1
}

// Operations the request log names (Request.Op).
const (
	OpList   = "list"
	OpCreate = "create"
	OpGet    = "get"
	OpUpdate = "update"
	OpDelete = "delete"
	OpPing   = "ping"
	// The delivery log: GET .../hooks/{id}/deliveries, GET .../deliveries/{delivery_id} and
	// POST .../deliveries/{delivery_id}/attempts.
	OpDeliveries = "deliveries"
	OpDelivery   = "delivery"
	OpRedeliver  = "redeliver"
)

// Request is one logged API request. Token is TokenLabel of the credential, never the
// credential; Body is the request body with config.secret masked.
type Request struct {
	Time   time.Time  `json:"time"`
	Token  string     `json:"token"`
	Method string     `json:"method"`
	Path   string     `json:"path"`
	Query  url.Values `json:"query,omitempty"`
	Body   string     `json:"body,omitempty"`
	// UserAgent is the request's User-Agent header.
	UserAgent string `json:"user_agent,omitempty"`
	// Op and Target name what the request addressed ("" when the path is not a hook route);
	// Target is lower-case ("repos/octo/hello"); an App route's is "app/<id>", the App its JWT
	// names (signed by that App or not). Every page of a list is one OpList request;
	// Page is the page it asked for (1 when the query names none), so Page == 1 counts Lists.
	Op     string `json:"op,omitempty"`
	Target string `json:"target,omitempty"`
	Page   int    `json:"page,omitempty"`
	// Conditional: the request carried If-None-Match. NotModified: it was answered 304, which
	// GitHub does not charge to the rate limit.
	Conditional bool `json:"conditional,omitempty"`
	NotModified bool `json:"not_modified,omitempty"`
	// Status is the HTTP status sent, or 499 if the client went away first.
	Status int `json:"status"`
	// RateLimited: the answer was a primary or (injected) secondary rate-limit refusal.
	RateLimited bool `json:"rate_limited,omitempty"`
	// Chaos is the failure WithChaos injected ("503 after apply"), "" for none. A timeout
	// after apply is logged as 499: it is held until the client gives up.
	Chaos string `json:"chaos,omitempty"`
}

func (r Request) clone() Request {
	r.Query = fakeapi.CloneValues(r.Query)
	return r
}

// TokenLabel is the stable, non-secret name the request log uses for a token.
func TokenLabel(tok string) string { return fakeapi.Label("tok_", tok) }

// Requests returns a copy of the request log in completion order.
func (s *Server) Requests() []Request { return s.requests.All() }

// ResetRequests empties the request log, so a test can count only what happens next.
func (s *Server) ResetRequests() { s.requests.Reset() }

// CountRequests counts logged requests with the given method ("" = any) whose path starts
// with pathPrefix, compared case-insensitively like GitHub's paths.
func (s *Server) CountRequests(method, pathPrefix string) int {
	prefix := strings.ToLower(pathPrefix)
	return s.requests.Count(func(r Request) bool {
		return fakeapi.Matches(method, prefix, r.Method, strings.ToLower(r.Path))
	})
}

// Stats sums up the request log.
type Stats struct {
	// ListPages counts list requests, one per page; Lists those for page 1, one per list a
	// client runs from the start. NotModified counts the 304s among list pages and single-hook
	// GETs, which cost no rate limit.
	ListPages, Lists, NotModified          int
	Creates, Gets, Updates, Deletes, Pings int
	// DeliveryLists counts pages of GET .../deliveries, DeliveryGets single deliveries, and
	// Redeliveries POST .../attempts requests (whatever their answer).
	DeliveryLists, DeliveryGets, Redeliveries int
	RateLimited                               int
}

// Stats counts the logged requests by operation.
func (s *Server) Stats() Stats {
	var st Stats
	for _, r := range s.requests.All() {
		switch r.Op {
		case OpList:
			st.ListPages++
			if r.Page == 1 {
				st.Lists++
			}
		case OpCreate:
			st.Creates++
		case OpGet:
			st.Gets++
		case OpUpdate:
			st.Updates++
		case OpDelete:
			st.Deletes++
		case OpPing:
			st.Pings++
		case OpDeliveries:
			st.DeliveryLists++
		case OpDelivery:
			st.DeliveryGets++
		case OpRedeliver:
			st.Redeliveries++
		}
		if r.NotModified {
			st.NotModified++
		}
		if r.RateLimited {
			st.RateLimited++
		}
	}
	return st
}
