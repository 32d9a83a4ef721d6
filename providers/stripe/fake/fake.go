// Package fake is a stateful, in-process stand-in for Stripe's webhook-endpoint API
// (/v1/webhook_endpoints) and its event log (/v1/events), with deliveries to the endpoints
// (see events.go), and for the v2 event destinations API (/v2/core/event_destinations, JSON:
// see destinations.go).
//
// It speaks Stripe's wire format (form-encoded requests, JSON responses, Stripe's error
// envelope, list pagination, Idempotency-Key replay) closely enough that an unmodified
// stripe-go v76 client can be pointed at it. Operator tests therefore exercise the same
// encoding, paging, idempotency and error paths they will meet against live Stripe, and the
// test-only helpers (Seed, Edit, Remove, Inject, Requests) let a test play the part of a
// user in the dashboard or of a flaky network.
//
// Every API key is a separate account with its own endpoints, idempotency cache and endpoint
// cap, so one Server can host many tenants.
package fake

import (
	"crypto/rand"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi"
)

// Defaults follow live Stripe: 16 endpoints per account and a 24 h idempotency window.
const (
	DefaultMaxEndpoints   = 16
	DefaultIdempotencyTTL = 24 * time.Hour
)

// Server is the fake Stripe API. It is an http.Handler; all methods are safe for concurrent
// use because tests drive it from the operator's goroutines and the test goroutine at once.
type Server struct {
	clock    fakeapi.Clock
	faults   fakeapi.Faults[Fault]
	chaos    *fakeapi.Chaos
	meter    *fakeapi.Meter
	requests *fakeapi.Log[Request]
	attempts *fakeapi.Log[Attempt]

	deliveryClient *http.Client
	apiVersion     string
	autoDisable    bool
	v1InV2         bool

	mu           sync.Mutex
	pageSize     int
	maxEndpoints int
	idemTTL      time.Duration
	rejected     map[string]bool
	restricted   map[string]bool
	accounts     map[string]*account
	seq          uint64
}

// Option configures a Server at construction.
type Option func(*Server)

// WithPageSize caps every list page at n items regardless of the client's limit, so tests can
// force multiple pages even though clients ask for limit=100. n <= 0 means no cap.
func WithPageSize(n int) Option { return func(s *Server) { s.pageSize = n } }

// WithMaxEndpoints sets the per-account endpoint cap (default 16, Stripe's documented limit).
func WithMaxEndpoints(n int) Option { return func(s *Server) { s.maxEndpoints = n } }

// WithIdempotencyTTL sets how long idempotency keys are remembered, measured on the Server's
// clock (default 24 h).
func WithIdempotencyTTL(d time.Duration) Option { return func(s *Server) { s.idemTTL = d } }

// WithMeter paces and counts the fake's requests like Stripe's rate limiter would (see
// fakeapi.Meter): a key beyond its rate gets Stripe's 429 with code rate_limit.
func WithMeter(m *fakeapi.Meter) Option { return func(s *Server) { s.meter = m } }

// WithClock sets the clock used for "created", idempotency expiry, event retention and
// retries; see SetClock.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.clock.Set(now) } }

// New returns an empty Server.
func New(opts ...Option) *Server {
	s := &Server{
		requests:     fakeapi.NewLog(Request.clone),
		attempts:     fakeapi.NewLog[Attempt](nil),
		apiVersion:   DefaultAPIVersion,
		maxEndpoints: DefaultMaxEndpoints,
		idemTTL:      DefaultIdempotencyTTL,
		rejected:     map[string]bool{},
		restricted:   map[string]bool{},
		accounts:     map[string]*account{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.deliveryClient == nil {
		s.deliveryClient = defaultDeliveryClient()
	}
	return s
}

// Start serves s on a fresh 127.0.0.1 port and returns its base URL (for
// stripe.BackendConfig.URL) and a function that stops it. It panics if it cannot listen, like
// httptest.NewServer, because callers are tests and demos with no way to recover.
func (s *Server) Start() (baseURL string, stop func()) { return fakeapi.Start(s) }

// Endpoint is the fake's stored state of one webhook endpoint. Unlike the API, it always
// carries Secret, so tests can check what the operator persisted.
type Endpoint struct {
	ID            string            `json:"id"`
	URL           string            `json:"url"`
	EnabledEvents []string          `json:"enabled_events"`
	Description   string            `json:"description,omitempty"` // "" is null on the wire
	Metadata      map[string]string `json:"metadata"`
	Status        string            `json:"status"`                // "enabled" or "disabled"
	APIVersion    string            `json:"api_version,omitempty"` // "" is null on the wire
	Connect       bool              `json:"connect"`               // stored only; Stripe does not echo it
	Application   string            `json:"application,omitempty"` // "" is null on the wire
	Created       time.Time         `json:"created"`               // sent as unix seconds
	Livemode      bool              `json:"livemode"`
	Secret        string            `json:"secret"`
	// Quirks change how the endpoint is rendered, for an object Stripe renders otherwise than
	// this fake makes them (a field of another type): the stored state is untouched.
	Quirks []fakeapi.Quirk `json:"quirks,omitempty"`
}

func (e Endpoint) clone() Endpoint {
	e.Quirks = fakeapi.CloneQuirks(e.Quirks)
	e.EnabledEvents = slices.Clone(e.EnabledEvents)
	e.Metadata = maps.Clone(e.Metadata)
	if e.Metadata == nil {
		e.Metadata = map[string]string{}
	}
	if e.EnabledEvents == nil {
		e.EnabledEvents = []string{}
	}
	return e
}

type account struct {
	endpoints []*entry
	// destinations are the v2 event destinations, in creation order (destinations.go).
	destinations []Destination
	idem         map[string]idemEntry
	events       []*eventEntry
	// lastOK is when a delivery to an endpoint last succeeded (WithAutoDisable).
	lastOK map[string]time.Time
}

type entry struct {
	Endpoint
	seq uint64 // creation order, breaks ties between equal Created seconds
}

type idemEntry struct {
	fingerprint string
	status      int
	body        []byte
	requestID   string
	at          time.Time
}

// AccountLabel is the stable, non-secret name the request log uses for an API key, so logs
// can be printed or served without leaking keys. "" stays "" (no key sent).
func AccountLabel(apiKey string) string { return fakeapi.Label("acct_", apiKey) }

// acct returns the account for key, creating it if create is set. Callers hold s.mu.
func (s *Server) acct(key string, create bool) *account {
	a := s.accounts[key]
	if a == nil && create {
		a = &account{idem: map[string]idemEntry{}}
		s.accounts[key] = a
	}
	return a
}

// ordered returns the account's endpoints newest first, as Stripe lists them. Callers hold s.mu.
func (a *account) ordered() []*entry {
	out := slices.Clone(a.endpoints)
	sort.SliceStable(out, func(i, j int) bool {
		if ti, tj := out[i].Created.Unix(), out[j].Created.Unix(); ti != tj {
			return ti > tj
		}
		return out[i].seq > out[j].seq
	})
	return out
}

func (a *account) find(id string) (int, *entry) {
	for i, e := range a.endpoints {
		if e.ID == id {
			return i, e
		}
	}
	return -1, nil
}

func (s *Server) now() time.Time { return s.clock.Now() }

// SetClock replaces the clock used for "created", idempotency expiry, event retention and
// delivery retries (nil restores time.Now), and forgets AdvanceClock. now is called with the Server's lock held, so it must not call back into s.
func (s *Server) SetClock(now func() time.Time) { s.clock.Set(now) }

// RejectKey makes requests with apiKey fail with 401 "Invalid API Key", as after a key is
// rolled in the dashboard. The account's state is kept.
func (s *Server) RejectKey(apiKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected[apiKey] = true
}

// AcceptKey undoes RejectKey.
func (s *Server) AcceptKey(apiKey string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rejected, apiKey)
}

// ExpireIdempotencyKeys forgets every stored idempotency key of every account, simulating the
// 24 h window passing without moving the clock.
func (s *Server) ExpireIdempotencyKeys() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		clear(a.idem)
	}
}

// Endpoints returns copies of apiKey's endpoints, newest first, secrets included.
func (s *Server) Endpoints(apiKey string) []Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acct(apiKey, false)
	if a == nil {
		return nil
	}
	var out []Endpoint
	for _, e := range a.ordered() {
		out = append(out, e.clone())
	}
	return out
}

// Seed stores e in apiKey's account out of band (no request is logged and MaxEndpoints is not
// enforced) and returns what was stored. Empty ID, Secret, Status and zero Created are filled
// in as a create would; an existing endpoint with the same ID is replaced.
func (s *Server) Seed(apiKey string, e Endpoint) Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	e = e.clone()
	if e.ID == "" {
		e.ID = newID("we_", 24)
	}
	if e.Secret == "" {
		e.Secret = newID("whsec_", 32)
	}
	if e.Status == "" {
		e.Status = statusEnabled
	}
	if e.Created.IsZero() {
		e.Created = s.now()
	}
	a := s.acct(apiKey, true)
	if _, old := a.find(e.ID); old != nil {
		old.Endpoint = e
		return e.clone()
	}
	s.seq++
	a.endpoints = append(a.endpoints, &entry{Endpoint: e, seq: s.seq})
	return e.clone()
}

// Remove deletes an endpoint out of band and reports whether it existed.
func (s *Server) Remove(apiKey, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acct(apiKey, false)
	if a == nil {
		return false
	}
	i, _ := a.find(id)
	if i < 0 {
		return false
	}
	a.endpoints = slices.Delete(a.endpoints, i, i+1)
	return true
}

// Edit changes an endpoint out of band (drift, as if edited in the dashboard) and reports
// whether it existed. fn gets a copy; the ID cannot be changed. fn runs with the Server's lock
// held, so it must not call back into s.
func (s *Server) Edit(apiKey, id string, fn func(*Endpoint)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.acct(apiKey, false)
	if a == nil {
		return false
	}
	_, e := a.find(id)
	if e == nil {
		return false
	}
	c := e.clone()
	fn(&c)
	c.ID = id
	e.Endpoint = c.clone()
	return true
}

// Request is one logged API request. Account is AccountLabel of the key, never the key.
type Request struct {
	Time    time.Time  `json:"time"`
	Account string     `json:"account"`
	Method  string     `json:"method"`
	Path    string     `json:"path"`
	Query   url.Values `json:"query,omitempty"`
	Form    url.Values `json:"form,omitempty"` // decoded request body
	// JSON is the body of a v2 request, as sent.
	JSON           json.RawMessage `json:"json,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	UserAgent      string          `json:"user_agent,omitempty"`
	// TraceParent is the request's W3C traceparent header (a client must send none).
	TraceParent string `json:"traceparent,omitempty"`
	// Status is the HTTP status sent, or 499 if the client went away before the response
	// (for example during injected latency).
	Status   int  `json:"status"`
	Replayed bool `json:"replayed,omitempty"` // served from the idempotency cache
	// Chaos is the failure WithChaos injected ("503 after apply"), "" for none.
	Chaos string `json:"chaos,omitempty"`
}

func (r Request) clone() Request {
	r.Query = fakeapi.CloneValues(r.Query)
	r.Form = fakeapi.CloneValues(r.Form)
	r.JSON = slices.Clone(r.JSON)
	return r
}

// Requests returns a copy of the request log in completion order.
func (s *Server) Requests() []Request { return s.requests.All() }

// CountRequests counts logged requests with the given method ("" = any) whose path starts
// with pathPrefix.
func (s *Server) CountRequests(method, pathPrefix string) int {
	return s.requests.Count(func(r Request) bool { return fakeapi.Matches(method, pathPrefix, r.Method, r.Path) })
}

// ResetRequests empties the request log, so a test can count only what happens next.
func (s *Server) ResetRequests() { s.requests.Reset() }

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix plus n random alphanumerics, the shape of Stripe ids and secrets.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead on broken systems)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return prefix + string(b)
}
