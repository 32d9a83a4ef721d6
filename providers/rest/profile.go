package rest

import (
	"encoding/json"
	"time"

	"github.com/hookwarden/hookwarden/providers"
)

// APIVersion is the profile format this package reads. A profile names it in apiVersion, so a
// later format can change fields without misreading profiles written for this one.
const APIVersion = "rest.hookwarden.io/v1alpha1"

// Kind is the kind every profile names.
const Kind = "Profile"

// Profile describes one webhook-management REST API: how to list, create, update and delete
// registrations, and how the bundled receiver verifies deliveries. It is data, read from YAML or
// JSON (Parse), checked before anything is sent (Validate); docs/providers.md walks through one.
//
// Templates (baseURL, paths, query and header values, static body values) are Go text/template
// over {{.Params.<name>}} (the subscription's parameters), {{.ID}} (the registration id, in
// paths) and, in auth only, {{.Credential}}. Functions: pathEscape, queryEscape, b64. A
// template that names a parameter the profile does not declare is an error.
//
// Paths into JSON bodies are gjson/sjson dot paths ("delivery_method.url", "meta.has_more").
type Profile struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name identifies the API in messages ("gitlab-project-hooks").
	Name string `json:"name"`
	// Docs is where the API is documented (informational).
	Docs string `json:"docs,omitempty"`
	// Parameters are what one list covers (a GitLab project, a Svix application) and other
	// per-subscription values (a Zendesk subdomain): spec.provider.rest.parameters.
	Parameters []Parameter `json:"parameters,omitempty"`
	// BaseURL is the API root, a template over parameters; spec.provider.apiURL replaces it. It
	// may carry a path (GitLab at https://host/gitlab/api/v4), but no credentials, query,
	// fragment or dot segments.
	BaseURL string `json:"baseURL"`
	Auth    Auth   `json:"auth"`
	// Headers are sent with every request (PagerDuty's versioned Accept); values are templates.
	Headers map[string]string `json:"headers,omitempty"`

	// Object says where a registration's fields live in the API's JSON.
	Object ObjectMapping `json:"object"`
	Events EventsMapping `json:"events"`
	Secret SecretMapping `json:"secret"`
	Marker MarkerMapping `json:"marker"`

	List   ListOp   `json:"list"`
	Get    *Op      `json:"get,omitempty"`
	Create CreateOp `json:"create"`
	Update UpdateOp `json:"update"`
	Delete Op       `json:"delete"`
	// Ping asks the API for a test delivery to a new registration (optional).
	Ping *Op `json:"ping,omitempty"`

	// Recover says how deliveries that never arrived come back (optional: without it the
	// client reports RecoveryNone, and the reconciler says recovery is not available).
	Recover *RecoverSpec `json:"recover,omitempty"`
	// Health says which fields of a registration tell how deliveries to it go (optional:
	// without it Registration.Health stays nil), and how a disabled one is enabled again.
	Health *HealthSpec `json:"health,omitempty"`

	Errors ErrorMapping `json:"errors,omitempty"`
	Limits Limits       `json:"limits,omitempty"`
	Verify VerifySpec   `json:"verify"`
}

// Parameter is one value a subscription supplies.
type Parameter struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	// Default is used when the subscription does not set the parameter.
	Default string `json:"default,omitempty"`
	// Pattern, a Go regular expression, the value must match in full.
	Pattern string `json:"pattern,omitempty"`
}

// Auth is the one header that carries the credential: PRIVATE-TOKEN: {{.Credential}},
// Authorization: Token token={{.Credential}}, Authorization: Basic {{b64 ...}}.
type Auth struct {
	Header string `json:"header"`
	Value  string `json:"value"`
}

// Op is one HTTP request.
type Op struct {
	// Method defaults per operation (GET, POST, DELETE; update by strategy).
	Method string `json:"method,omitempty"`
	// Path is appended to the base URL; a template ({{.ID}} is the registration id).
	Path string `json:"path"`
	// Query parameters, values templated.
	Query map[string]string `json:"query,omitempty"`
	// Headers for this request only, values templated ({{.IdempotencyKey}} on create).
	Headers map[string]string `json:"headers,omitempty"`
	// Success are the statuses that mean success; empty means any 2xx.
	Success []int `json:"success,omitempty"`
}

// ObjectMapping locates a registration's fields. Request and response paths are kept apart
// where the API names a field differently on write and read (Calendly: url / callback_url).
type ObjectMapping struct {
	// RequestEnvelope wraps create and update bodies ({"webhook": {...}}); "" sends the object bare.
	RequestEnvelope string `json:"requestEnvelope,omitempty"`
	// ResponseEnvelope unwraps single-object responses (get, create, update); "" means bare.
	ResponseEnvelope string `json:"responseEnvelope,omitempty"`
	// ID is the response path of the id; numbers are read as written.
	ID Field `json:"id"`
	// IDFromURI takes the last path segment of the id field's value (Calendly's uri).
	IDFromURI   bool    `json:"idFromURI,omitempty"`
	URL         Field   `json:"url"`
	Description *Field  `json:"description,omitempty"`
	Disabled    *Toggle `json:"disabled,omitempty"`
	// Created is the response path of the creation time (RFC 3339), used to keep the oldest twin.
	Created *Field `json:"created,omitempty"`
	// Static are values create (and a full update) sends besides the mapped fields: required
	// discriminators and objects (PagerDuty type and filter, Zendesk http_method). Keys are
	// request paths; string values are templates, and a top-level one that renders empty (an
	// unset optional parameter) is left out.
	Static map[string]any `json:"static,omitempty"`
	// Expect are response values that must hold for the registration to work as created
	// (Zendesk request_format json); a differing value is reported as Misconfigured drift,
	// which an update repairs by sending Static again.
	Expect map[string]any `json:"expect,omitempty"`
}

// Field is a value at a path. Response defaults to Path.
type Field struct {
	// Path is the request path (and the response path unless Response is set).
	Path string `json:"path"`
	// Response is the path the API returns the value at, when it differs from Path.
	Response string `json:"response,omitempty"`
	// Optional: the response may lack the field (then it reads as empty). Otherwise a response
	// without it does not fit: a single answer fails naming the path, and a listed item is
	// returned with Unfit saying so, so a wrong path is found at once instead of read as drift.
	// null always reads as the empty value.
	Optional bool `json:"optional,omitempty"`
}

// ResponsePath is where the value is read.
func (f Field) ResponsePath() string {
	if f.Response != "" {
		return f.Response
	}
	return f.Path
}

// Toggle maps Desired.Disabled onto the API: a boolean (disabled, or active with Invert) or a
// string with two values (Zendesk status active/inactive).
type Toggle struct {
	Field
	Invert bool `json:"invert,omitempty"`
	// Enabled and Disabled, both set, make the field a string with these two values (keys
	// "on"/"off" would read as booleans in YAML).
	Enabled  string `json:"enabledValue,omitempty"`
	Disabled string `json:"disabledValue,omitempty"`
}

// Event styles.
const (
	EventsList            = "list"            // an array of strings at Path
	EventsFlags           = "flags"           // one boolean per event (GitLab)
	EventsPerRegistration = "perRegistration" // one registration per event, the event a scalar at Path (Shopify topic)
)

// EventsMapping says how events are written and read.
type EventsMapping struct {
	Style string `json:"style"`
	// Field is the array (list) or scalar (perRegistration) holding events.
	Field
	// Flags maps each event name to its boolean's path (flags). Every flag is sent on create
	// and update: true when selected, false otherwise, since unsent flags keep server defaults.
	// A flag that is null or missing reads as off (an older server neither stores nor renders
	// a flag it does not know); an answer to a create or update that does not show a selected
	// flag as true fails it.
	Flags map[string]string `json:"flags,omitempty"`
	// All is what "*" (every event) is at this API, sent and recognised on read: null (Svix
	// eventTypes) or ["*"] (GitHub, Stripe). Absent: the API has no such value and "*" is refused.
	All *AllEvents `json:"all,omitempty"`
}

// AllEvents holds the JSON value that means every event.
type AllEvents struct {
	Value json.RawMessage `json:"value"`
}

// Secret modes.
const (
	SecretModeClientChosen     = "clientChosen"     // we choose it and write it at Path; never returned
	SecretModeReturnedOnCreate = "returnedOnCreate" // read at Path in the create response only
	SecretModeReadable         = "readable"         // read at Path on create, get and list
	SecretModeFetched          = "fetched"          // read from a separate request (Fetch) at Path
	SecretModeNone             = "none"             // deliveries are not signed
)

// SecretMapping says who chooses the signing secret and where it is written or read.
type SecretMapping struct {
	Mode string `json:"mode"`
	// Path is the request path (clientChosen) or the response path (the others) of the secret.
	Path string `json:"path,omitempty"`
	// Fetch reads the secret of registration {{.ID}} (fetched); Path is read from its response.
	Fetch *Op `json:"fetch,omitempty"`
	// SendOnUpdate: an update without the secret clears or resets it (GitLab resets the token
	// when the URL changes), so every update sends it.
	SendOnUpdate bool `json:"sendOnUpdate,omitempty"`
}

// Marker locations.
const (
	MarkerNone        = "none"        // URL only: ownership is proven by recorded id, held secret, receiver URL
	MarkerField       = "field"       // a string field of its own (GitLab name)
	MarkerDescription = "description" // appended to the description
	MarkerMetadata    = "metadata"    // keys in a string map (Svix metadata)
	MarkerHeader      = "header"      // a custom header the API stores and sends with deliveries
)

// MarkerMapping says where the ownership marker lives.
type MarkerMapping struct {
	Location string `json:"location"`
	// Path is the string field (field), the map (metadata) or the custom-header container
	// (header); description uses object.description.
	Path string `json:"path,omitempty"`
	// Header is the custom header's name (header).
	Header string `json:"header,omitempty"`
	// HeaderList: the container is a list of {name, value} objects (PagerDuty) rather than an
	// object keyed by header name (Zendesk). NameKey and ValueKey default to name and value.
	HeaderList bool   `json:"headerList,omitempty"`
	NameKey    string `json:"nameKey,omitempty"`
	ValueKey   string `json:"valueKey,omitempty"`
}

// Pagination styles.
const (
	PageNone   = "none"
	PagePage   = "page"   // page + per_page, ends on a short page
	PageOffset = "offset" // offset + limit, ends when More is false (or on a short page)
	PageCursor = "cursor" // a cursor read from the body, ends on HasMore false, Done true or no cursor
	PageLink   = "link"   // the Link header's rel="next" URL, followed verbatim
	// PageNextURL: the next page's URL at a body path (Bitbucket's next), followed verbatim;
	// the list ends when the body has none (absent, null or empty).
	PageNextURL = "nextURL"
)

// ListOp is the list request and its paging.
type ListOp struct {
	Op
	// Items is the response path of the array of registrations; "" means the body is the array.
	Items      string     `json:"items,omitempty"`
	Pagination Pagination `json:"pagination,omitempty"`
}

// Pagination describes one paging style.
type Pagination struct {
	Style string `json:"style,omitempty"`
	// SizeParam and Size ask for pages of Size items (all styles but none).
	SizeParam string `json:"sizeParam,omitempty"`
	Size      int    `json:"size,omitempty"`
	// PageParam and FirstPage (default 1): page.
	PageParam string `json:"pageParam,omitempty"`
	FirstPage int    `json:"firstPage,omitempty"`
	// OffsetParam: offset. More is the response path of "more pages follow".
	OffsetParam string `json:"offsetParam,omitempty"`
	More        string `json:"more,omitempty"`
	// CursorParam, Next (the response path of the next cursor) or NextFromLastID (the cursor is
	// the last item's id, Resend and Stripe), and the end: HasMore false, Done true, or no cursor.
	// nextURL: Next is the response path of the next page's URL.
	CursorParam    string `json:"cursorParam,omitempty"`
	Next           string `json:"next,omitempty"`
	NextFromLastID bool   `json:"nextFromLastID,omitempty"`
	HasMore        string `json:"hasMore,omitempty"`
	Done           string `json:"done,omitempty"`
}

// CreateOp is the create request.
type CreateOp struct {
	Op
	// AlreadyExists are answers that mean a registration for this target exists (GitHub's 422
	// "Hook already exists"): the reconciler lists again instead of failing.
	AlreadyExists []Match `json:"alreadyExists,omitempty"`
}

// Update strategies.
const (
	UpdatePatch      = "patch"      // PATCH with the changed-able fields
	UpdatePutPartial = "putPartial" // PUT that applies only what is sent (GitLab, PagerDuty)
	UpdatePutFull    = "putFull"    // PUT that replaces the object: everything create sends
	UpdateNone       = "none"       // no update: every change recreates
)

// UpdateOp is the update request.
type UpdateOp struct {
	Strategy string `json:"strategy"`
	Op
	// Static replaces object.static on a partial update (nil: none is sent; putFull always
	// sends object.static).
	Static map[string]any `json:"static,omitempty"`
	// Recreate lists fields the API cannot change in place (url, events, description,
	// disabled, marker): a change to one needs a new registration.
	Recreate []string `json:"recreate,omitempty"`
}

// Match selects an error answer: a status, and optionally a text in the body.
type Match struct {
	Status   int    `json:"status"`
	Contains string `json:"contains,omitempty"`
}

// ErrorMapping says how to read the API's errors and limits.
type ErrorMapping struct {
	// Message are response paths tried in order for the API's error message.
	Message []string `json:"message,omitempty"`
	// Quota are answers that mean an account limit was hit.
	Quota []Match `json:"quota,omitempty"`
	// RequestIDHeader carries the API's request id, for support.
	RequestIDHeader string    `json:"requestIDHeader,omitempty"`
	RateLimit       RateLimit `json:"rateLimit,omitempty"`
}

// RateLimit says how the API signals a rate limit and the wait it asks for.
type RateLimit struct {
	// Status are the statuses that mean rate-limited (default 429).
	Status []int `json:"status,omitempty"`
	// RetryAfterHeader is read first (default Retry-After: seconds or an HTTP date).
	RetryAfterHeader string `json:"retryAfterHeader,omitempty"`
	// ResetHeader is read next: seconds until the limit resets (ResetEpoch: a unix time).
	ResetHeader string `json:"resetHeader,omitempty"`
	ResetEpoch  bool   `json:"resetEpoch,omitempty"`
	// RemainingHeader "0" on a 403 makes it a rate limit (GitHub-style APIs).
	RemainingHeader string `json:"remainingHeader,omitempty"`
	// Backoff is how long the credential waits after rate limits that state no wait, in a run
	// of them; a stated wait (the headers above) always wins.
	Backoff Backoff `json:"backoff,omitempty"`
}

// Backoff is a growing wait: first, then factor times the one before, never longer than max.
// Unset fields take the defaults (providers.DefaultRateLimitBackoff: 1s, ×2, up to 1m; max at
// least first), sized to the per-minute windows most APIs count in.
type Backoff struct {
	First  Duration `json:"first,omitempty"`
	Factor float64  `json:"factor,omitempty"`
	Max    Duration `json:"max,omitempty"`
}

// MaxBackoff bounds Backoff.First and Backoff.Max: no API's rate-limit window is longer than an
// hour, and a longer wait would only hide a subscription's progress.
const MaxBackoff = time.Hour

// MaxBackoffFactor bounds Backoff.Factor.
const MaxBackoffFactor = 10

// Policy is b with the defaults filled in.
func (b Backoff) Policy() providers.Backoff {
	d := providers.DefaultRateLimitBackoff
	out := providers.Backoff{First: time.Duration(b.First), Factor: b.Factor, Max: time.Duration(b.Max)}
	if out.First <= 0 {
		out.First = d.First
	}
	if out.Factor <= 0 {
		out.Factor = d.Factor
	}
	if out.Max <= 0 {
		out.Max = max(d.Max, out.First)
	}
	return out
}

// Limits bound what one list may cost.
type Limits struct {
	// MaxPages one list may follow (default 50, at most 1000).
	MaxPages int `json:"maxPages,omitempty"`
	// MaxResponseBytes of one response (default 1 MiB, at most 16 MiB).
	MaxResponseBytes int `json:"maxResponseBytes,omitempty"`
}

// Defaults and ceilings of Limits.
const (
	DefaultMaxPages         = 50
	MaxMaxPages             = 1000
	DefaultMaxResponseBytes = 1 << 20
	MaxMaxResponseBytes     = 16 << 20
)

// Duration is a time.Duration written as "30s" in profiles.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
