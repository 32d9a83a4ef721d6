// Package providers defines the contract between the reconciler and one webhook provider API.
//
// A provider package sees plain Go values, never custom resources, and classifies every error it
// returns at the boundary (see Error), so the reconciler can decide between requeue, backoff and
// stall without knowing the provider. What a provider can promise (markers, who chooses the
// secret, replayable creates, which fields exist) is data, Capabilities, that the reconciler's
// plan reads: it never assumes the habits of one provider.
package providers

import (
	"context"
	"math"
	"net/http"
	"sort"
	"time"
)

// Owner identifies the WebhookSubscription a registration belongs to. Providers that can store
// metadata (Stripe) write it as an ownership marker; Cluster keeps two clusters that share one
// provider account from pruning each other's registrations.
type Owner struct {
	Cluster   string
	Namespace string
	Name      string
	UID       string
}

// IsZero reports whether the owner carries no identity at all (an unmarked registration).
func (o Owner) IsZero() bool { return o == Owner{} }

// Registration is one webhook registration as the provider reports it.
type Registration struct {
	ID          string
	URL         string
	Events      []string
	Description string
	Disabled    bool
	// Owner is the decoded ownership marker; zero when the registration carries none (always,
	// on providers without Capabilities.Markers).
	Owner Owner
	// CreateKey is the idempotency key the registration was created with, when the provider
	// stores it (Stripe: in metadata). Replaying a create with it recovers a lost secret.
	CreateKey string
	// Secret is the signing secret, when the provider reveals it: Stripe only in the create
	// response (and in an idempotent replay of it); never for client-chosen secrets.
	Secret  string
	Created time.Time
	// Misconfigured names provider-specific settings that differ from what the provider's
	// Create would set (GitHub: content_type, insecure_ssl). They count as drift, and Update
	// repairs them.
	Misconfigured []string
	// Reconfigures says, for the settings of Misconfigured it knows, what the provider reports
	// and what Update sets instead (GitHub content_type: form -> json), so a plan or an import
	// can say what adoption changes.
	Reconfigures map[string]ValueChange
	// LastDelivery is what the provider reports about its latest delivery to this registration
	// (GitHub's last_response); nil when it reports nothing.
	LastDelivery *DeliveryReport
	// Health is what the list itself says about deliveries to the registration (Stripe's
	// status disabled, GitLab's disabled_until and alert_status, GitHub's last_response); nil
	// when it says nothing. HealthReporter may tell more.
	Health *DeliveryHealth
	// Variant names what kind of registration this is, where one provider account holds
	// several kinds that can serve the same URL (Stripe: a v1 webhook endpoint, a v2 event
	// destination with thin or with snapshot payloads); empty on providers with one kind.
	// Registrations of different variants are different registrations: never twins of each
	// other, never a match for a subscription of another variant (Capabilities.Variant).
	Variant string
	// Unfit, when not empty, says what in the provider's object does not fit the shape the
	// client reads (field paths and problems, "config.url is missing; events is not an
	// array"), in words safe to show a user: it never holds a value read from the object. Only
	// List returns unfit registrations, so that one odd object costs nothing but a report; the
	// other fields hold what could be read (the URL and the marker when readable). ID is empty
	// when the object's id could not be read: such an entry can never be proven ours nor be
	// changed, only reported. An unfit registration that is not provably ours is foreign; one
	// of ours is drift (or a stall) for its subscription alone. Create, Update and the like
	// return an error instead (with whatever could be read).
	Unfit string
}

// ValueChange is a setting's value as the provider reports it, and as Update sets it.
type ValueChange struct {
	From, To string
}

// Reconfigure records that Update changes setting field from the value the provider reports to
// the one its Create sets (Misconfigured, with the values).
func (r *Registration) Reconfigure(field, from, to string) {
	r.Misconfigured = append(r.Misconfigured, field)
	if r.Reconfigures == nil {
		r.Reconfigures = map[string]ValueChange{}
	}
	r.Reconfigures[field] = ValueChange{From: from, To: to}
}

// DeliveryReport is the provider's account of its latest delivery attempt to a registration.
type DeliveryReport struct {
	// Code is the HTTP status the endpoint answered (0 when none: never delivered, or no answer).
	Code int
	// Status is the provider's word for the outcome ("active", "unused", ...).
	Status  string
	Message string
}

// Desired is what a registration should look like.
type Desired struct {
	URL         string
	Events      []string
	Description string
	Disabled    bool
	Owner       Owner
	// Secret is the signing secret to set, for providers whose client chooses it
	// (SecretClientChosen): required on Create, and on Update when UpdateNeedsSecret. Other
	// providers ignore it.
	Secret string
}

// SecretMode says who chooses a registration's signing secret and how the operator learns it.
type SecretMode int

const (
	// SecretReturnedOnCreate: the provider generates the secret and returns it only in the
	// create response (Stripe). A lost secret is recovered by replaying the create (when
	// ReplayableCreate) or by rotating to a new registration, make-before-break.
	SecretReturnedOnCreate SecretMode = iota
	// SecretClientChosen: the client generates the secret and sends it; the provider never
	// reveals it again (GitHub masks it as "********"). A lost secret is repaired by setting a
	// new one on the same registration.
	SecretClientChosen
	// SecretNone: deliveries are not signed; there is nothing to store.
	SecretNone
	// SecretReadable: the provider generates the secret and reveals it whenever the
	// registration is read (Resend): Create, List and Update fill Registration.Secret. A
	// secret that is not held is simply read again.
	SecretReadable
	// SecretFetched: the provider generates the secret and reveals it through a separate
	// request (Zendesk GET /webhooks/{id}/signing_secret, Svix GET .../secret): the client
	// implements SecretFetcher, and Create fetches it, filling Registration.Secret. A secret
	// that is not held is fetched again.
	SecretFetched
)

func (m SecretMode) String() string {
	switch m {
	case SecretReturnedOnCreate:
		return "returned-on-create"
	case SecretClientChosen:
		return "client-chosen"
	case SecretNone:
		return "none"
	case SecretReadable:
		return "readable"
	case SecretFetched:
		return "fetched"
	}
	return "unknown"
}

// Field is one property of a registration that a provider may or may not have.
type Field uint

const (
	FieldDescription Field = 1 << iota
	FieldDisabled
	// FieldMarker is the ownership marker (Owner and CreateKey).
	FieldMarker
	// FieldURL and FieldEvents exist on every registration; they are named only in
	// Capabilities.Recreate.
	FieldURL
	FieldEvents
)

// Capabilities state what a provider can promise. The reconciler decides from them: how
// ownership is proven, how a secret is obtained and recovered, what counts as drift.
type Capabilities struct {
	// Markers: the provider stores an ownership marker with each registration and List returns
	// it (Stripe metadata). Without markers a registration is ours only when proven otherwise:
	// its id is recorded, its secret is held, or its URL is the bundled receiver's URL for the
	// subscription.
	Markers bool
	// Secret is who chooses the signing secret.
	Secret SecretMode
	// UpdateNeedsSecret: an update that omits the secret clears it (GitHub), so every Update
	// carries Desired.Secret.
	UpdateNeedsSecret bool
	// ReplayableCreate: repeating Create with the same idempotency key and identical parameters
	// returns the original response, secret included (Stripe, for 24 h), so a crash after the
	// provider's answer loses nothing.
	ReplayableCreate bool
	// Fields the registrations carry besides URL and events (which every provider has). A field
	// the provider does not have is never counted as drift.
	Fields Field
	// ReadOnly are fields the provider shows but its API cannot change (a GitHub App's events,
	// set in the App's settings only): a difference is reported, never "repaired"; Update
	// leaves them as they are.
	ReadOnly Field
	// Recreate are the fields Update cannot change in place (PagerDuty's delivery URL; every
	// field where the API has no update at all, Calendly): drift in one of them is repaired by
	// a new registration (create, store its secret, then delete the old one, as a rotation),
	// never by Update, which refuses such a change with a Permanent error.
	Recreate Field
	// Rate is the request rate the provider documents for this client's credential, which the
	// manager paces it at (unless told otherwise); zero when the provider documents none.
	Rate Rate
	// RateLimitBackoff is how long the credential waits after rate-limit answers that state no
	// wait (no Retry-After, no reset), in a run of such answers: the provider's own rules, sized
	// to the window its limiter counts in. A wait the provider states always wins. Zero means
	// DefaultRateLimitBackoff.
	RateLimitBackoff Backoff
	// Recovery is how the provider's missed deliveries come back, and how far back.
	Recovery RecoveryCapabilities
	// Singleton: the account has exactly one registration, part of the account itself (a
	// GitHub App's webhook): List shows it once it has a URL; Create sets it where it has none
	// (AlreadyExists where it serves another URL), never a second; Delete cannot remove it. The
	// plan repairs it in place whenever it is proven ours, whatever its URL (never a prune), and
	// takes over none that serves another URL (a conflict, whatever policies.adoption says:
	// repointing it would take its deliveries from whoever set it).
	Singleton bool
	// Variant is the kind of registration this client creates and manages
	// (Registration.Variant); empty on providers with one kind. A listed registration of
	// another variant is not this client's to match, prune or adopt, whatever its URL and
	// marker: a Stripe v1 endpoint and a v2 destination on one URL run side by side during a
	// migration.
	Variant string
}

// Backoff is a growing wait: First, then each next one Factor times the one before, never
// longer than Max.
type Backoff struct {
	First  time.Duration
	Factor float64
	Max    time.Duration
}

// DefaultRateLimitBackoff is the backoff of a provider that states none: a second, doubling,
// up to a minute, the window most APIs count in (requests per minute).
var DefaultRateLimitBackoff = Backoff{First: time.Second, Factor: 2, Max: time.Minute}

// IsZero reports whether no backoff is stated.
func (b Backoff) IsZero() bool { return b == Backoff{} }

// Step is the wait after the n-th answer in a row (n from 0) that states none: First·Factorⁿ,
// at most Max. A Factor below 1 counts as 1 and a Max below First as First, so waits never
// shrink within a run.
func (b Backoff) Step(n int) time.Duration {
	limit := max(b.Max, b.First)
	d := float64(b.First) * math.Pow(max(b.Factor, 1), float64(max(n, 0)))
	if d >= float64(limit) || math.IsNaN(d) {
		return limit
	}
	return time.Duration(d)
}

// Rate is a documented request rate: a sustained number per second and how many requests
// may go at once.
type Rate struct {
	PerSecond float64
	Burst     int
}

// IsZero reports whether no rate is documented.
func (r Rate) IsZero() bool { return r.PerSecond <= 0 }

// Has reports whether the provider's registrations carry f.
func (c Capabilities) Has(f Field) bool { return c.Fields&f != 0 }

// Client talks to one provider account: whatever one list covers (a Stripe account, one GitHub
// repository or organization). Implementations are safe for concurrent use.
type Client interface {
	// Capabilities says what this provider can promise; it never changes.
	Capabilities() Capabilities
	// List returns every registration on the account, following all pages.
	List(ctx context.Context) ([]Registration, error)
	// Create registers a webhook. idempotencyKey is deterministic per attempt: on providers with
	// ReplayableCreate, repeating the call with the same key and the same Desired replays the
	// original response, secret included. A provider that refuses a second registration for
	// the same target answers AlreadyExists.
	Create(ctx context.Context, d Desired, idempotencyKey string) (Registration, error)
	// Update changes a registration in place (URL, events and whatever Capabilities.Fields
	// lists, and Misconfigured settings). It never rotates a provider-chosen secret; with
	// SecretClientChosen it sets d.Secret.
	Update(ctx context.Context, id string, d Desired) (Registration, error)
	// Delete removes a registration; a registration that is already gone is not an error.
	Delete(ctx context.Context, id string) error
}

// Pinger is implemented by providers that can be asked to send a test delivery to a
// registration (GitHub's ping). The reconciler pings after a create and reports the outcome.
type Pinger interface {
	Ping(ctx context.Context, id string) error
}

// SecretFetcher is implemented by providers with SecretFetched (and may be by SecretReadable
// ones): it reads the current signing secret of registration id.
type SecretFetcher interface {
	FetchSecret(ctx context.Context, id string) (string, error)
}

// VerifierDescriber is implemented by providers whose deliveries are verified by a scheme the
// receiver cannot know from the provider type alone (a REST profile's). The manager stores the
// description beside the signing secrets, in the signing Secret, so the receiver needs to read
// nothing else.
type VerifierDescriber interface {
	// VerifierSpec describes how deliveries to this account's registrations are verified, in a
	// form the receiver's verifier for the provider type parses.
	VerifierSpec() []byte
}

// Config is what a Factory needs to build a Client for one account.
type Config struct {
	// APIURL overrides the provider's default API base URL (stripe-mock, fakes, GitHub Enterprise).
	APIURL string
	// Target names what one list covers when one credential spans several (GitHub:
	// "repos/<owner>/<repository>" or "orgs/<organization>"); empty for providers whose
	// credential is the account (Stripe).
	Target string
	// Settings are provider-specific and opaque to the reconciler: a REST provider's profile.
	// Clients built from different settings are different accounts.
	Settings []byte
	// Credential is the API key or token. It must never appear in logs or errors.
	Credential string
	// Timeout bounds one HTTP request.
	Timeout time.Duration
	// Pace, when set, is called before every HTTP request the client sends (each page of a
	// list counts), and the request fails with its error: the manager's per-credential rate.
	Pace func(context.Context) error
	// Wrap, when set, wraps the transport every HTTP request of the client goes through,
	// pacing included: the manager's tracing, one client span per request with its wait for
	// Pace inside it.
	Wrap func(http.RoundTripper) http.RoundTripper
	// Now is the clock against which the provider's stated waits are read (a Retry-After
	// date, an epoch reset); nil means time.Now. The manager passes its own, so tests can
	// inject one.
	Now func() time.Time
}

// Transport is the transport a client built from cfg sends its requests through: Pace over
// http.DefaultTransport, wrapped by Wrap. It is nil when cfg sets neither (the client keeps
// its HTTP library's own).
func (cfg Config) Transport() http.RoundTripper {
	if cfg.Pace == nil && cfg.Wrap == nil {
		return nil
	}
	t := PacedTransport(cfg.Pace, nil)
	if cfg.Wrap != nil {
		t = cfg.Wrap(t)
	}
	return t
}

// Clock is cfg.Now, or time.Now when it is nil.
func (cfg Config) Clock() func() time.Time {
	if cfg.Now == nil {
		return time.Now
	}
	return cfg.Now
}

// Factory builds a Client for one account.
type Factory interface {
	New(cfg Config) (Client, error)
}

// FactoryFunc adapts a function to Factory.
type FactoryFunc func(cfg Config) (Client, error)

// New calls f.
func (f FactoryFunc) New(cfg Config) (Client, error) { return f(cfg) }

// FactoryOf makes a provider's concrete constructor a Factory. A failed New gives a nil Client,
// not a Client holding a nil *C.
func FactoryOf[C Client](newClient func(Config) (C, error)) Factory {
	return FactoryFunc(func(cfg Config) (Client, error) {
		c, err := newClient(cfg)
		if err != nil {
			return nil, err
		}
		return c, nil
	})
}

// Provider is one provider type as main registers it: how its clients are built, how a
// subscription's provider block is read, how its deliveries are verified. Adding a provider is
// a package that returns one of these, and one line in providers/builtin.
type Provider struct {
	// Factory builds a Client per account.
	Factory Factory
	// CredentialKey is the key of the credentials Secret read when
	// spec.provider.credentialsRef.key is empty: the provider's own word for its credential.
	CredentialKey string
	// Scope reads a subscription's provider block (spec.provider.<type> as JSON; nil when the
	// spec has none) and its events, checks them against the provider's rules, and says what
	// one list covers. An error's message names the field first (spec.provider.github.owner
	// ...): it is shown to the user as is.
	Scope func(block []byte, events []string) (Scope, error)
	// Verifier checks deliveries to the provider's registrations (the receiver). Nil where the
	// scheme is described per account instead (VerifierDescriber): VerifierFromSpec builds a
	// verifier from the description the manager stores in the signing Secret.
	Verifier         Verifier
	VerifierFromSpec func(spec []byte) (Verifier, error)
}

// Scope is what a subscription's provider block names: what one list covers, and the
// provider-specific settings.
type Scope struct {
	// Target is Config.Target.
	Target string
	// Settings are Config.Settings given in the spec itself (a REST profile inline).
	Settings []byte
	// SettingsRef names the ConfigMap key, in the subscription's namespace, that holds the
	// settings instead (a REST profile's profileRef); the manager reads it.
	SettingsRef *ConfigMapKey
	// CredentialKey, when set, is the key of the credentials Secret read when
	// spec.provider.credentialsRef.key is empty, instead of Provider.CredentialKey: the word for
	// the credential this block's target takes (a GitHub App's privateKey).
	CredentialKey string
}

// ConfigMapKey names one key of a ConfigMap, and the spec field that named it (for messages).
type ConfigMapKey struct {
	Name, Key string
	Field     string
}

// Registry maps a provider type (as spelled in spec.provider.type) to the Provider. main builds
// it (providers/builtin) and passes it on; there is no global registry.
type Registry map[string]Provider

// Types are the registered provider types, sorted.
func (r Registry) Types() []string {
	out := make([]string, 0, len(r))
	for t := range r {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
