package account

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
)

// Accounts keeps one entry per provider account: whatever one list covers (a Stripe account, one
// GitHub repository or organization). Each entry holds the last full list of registrations and
// a lock that serializes observe-plan-act on the account, so two subscriptions never plan
// against each other's half-applied changes.
//
// Rate limits are kept per credential, which is what providers limit (a Stripe key; a GitHub
// token, across every repository it reaches): all accounts reached with one credential share
// one token bucket and one rate-limit backoff.
//
// The list is shared: a subscription that reconciles within maxAge of the last list reuses it,
// and our own writes are applied to the cached list in place. That is what keeps provider list
// calls per resync wave constant in the number of subscriptions.
type Accounts struct {
	registry providers.Registry
	opts     AccountOptions
	metrics  *Metrics

	mu       sync.Mutex
	m        map[string]*Account
	limiters map[string]*limiter
	// users are the subscriptions ("namespace/name") using each account, by account id; owner
	// is the account each subscription uses. An account no subscription uses any more (its
	// subscriptions deleted, or moved to another credential, target or profile) is evicted,
	// client, cached list and all, and a credential's limiter with its last account.
	users map[string]map[string]bool
	owner map[string]string
}

// AccountOptions tune the per-account client.
type AccountOptions struct {
	// QPS and Burst, when set, bound the requests made with one credential whatever its
	// provider. Zero means the provider's documented rate for the credential
	// (providers.Capabilities.Rate: Stripe test mode 25/s, live 100/s; GitHub 1.2/s), or
	// DefaultQPS and DefaultBurst for a provider that documents none.
	QPS   float64
	Burst int
	// RequestTimeout bounds one provider request.
	RequestTimeout time.Duration
	// Now is the clock, of the limiters and of the waits the providers state (tests inject one).
	Now func() time.Time
	// Jitter draws the jitter of rate-limit backoffs, a fraction in [0, 1) (see
	// limiter.backoff); nil draws from math/rand/v2. Every limiter calls it, so it must be safe
	// for concurrent use. Tests inject one to compute the waits.
	Jitter func() float64
	// Metrics count and time provider requests; nil: counted, never served.
	Metrics *Metrics
	// Tracing writes a client span per provider request (nil or disabled: none), with the
	// time it waited for its credential's pace.
	Tracing *telemetry.Tracing
}

// Defaults of AccountOptions.
const (
	DefaultQPS   = 10
	DefaultBurst = 5
)

// NewAccounts returns an empty account table over the given provider registry.
func NewAccounts(registry providers.Registry, o AccountOptions) *Accounts {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 20 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	metrics := UnregisteredMetrics()
	if o.Metrics != nil {
		metrics = o.Metrics
	}
	types := make([]string, 0, len(registry))
	for t := range registry {
		types = append(types, t)
	}
	metrics.knowProviders(types)
	return &Accounts{
		registry: registry, opts: o, metrics: metrics,
		m: map[string]*Account{}, limiters: map[string]*limiter{},
		users: map[string]map[string]bool{}, owner: map[string]string{},
	}
}

// Registry is the provider registry the accounts are built from.
func (a *Accounts) Registry() providers.Registry { return a.registry }

// AccountKey names one provider account.
type AccountKey struct {
	Provider string
	APIURL   string
	// Target is what one list covers when a credential spans several (providers.Config.Target).
	Target string
	// Settings are the provider-specific settings (providers.Config.Settings).
	Settings   []byte
	Credential string
}

// id names the account without keeping the credential itself.
func (k AccountKey) id() string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(k.Provider), []byte(k.APIURL), []byte(k.Target), k.Settings, []byte(k.Credential)} {
		// Length-prefixed, so no two different keys hash the same bytes.
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return k.Provider + "/" + hex.EncodeToString(h.Sum(nil)[:8])
}

// limiterID names what the provider rate-limits: the credential at one API.
func (k AccountKey) limiterID() string {
	k.Target, k.Settings = "", nil
	return k.id()
}

// errUnknownProvider is returned for a provider type main did not register.
type errUnknownProvider string

func (e errUnknownProvider) Error() string { return "provider type " + string(e) + " is not supported" }

// For returns the account for key, on behalf of subscription user ("namespace/name"): the
// Account the user used before is released (and evicted if nobody else uses it).
func (a *Accounts) For(user string, key AccountKey) (*Account, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	acct, err := a.get(key)
	if err != nil {
		return nil, err
	}
	if prev, ok := a.owner[user]; ok && prev != acct.id {
		a.release(user)
	}
	a.owner[user] = acct.id
	if a.users[acct.id] == nil {
		a.users[acct.id] = map[string]bool{}
	}
	a.users[acct.id][user] = true
	return acct, nil
}

// Release says subscription user uses no account any more (it is gone).
func (a *Accounts) Release(user string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.release(user)
}

func (a *Accounts) release(user string) {
	id, ok := a.owner[user]
	if !ok {
		return
	}
	delete(a.owner, user)
	delete(a.users[id], user)
	if len(a.users[id]) > 0 {
		return
	}
	delete(a.users, id)
	acct := a.m[id]
	delete(a.m, id)
	if acct == nil {
		return
	}
	for _, other := range a.m {
		if other.limiter == acct.limiter {
			return
		}
	}
	for lid, l := range a.limiters {
		if l == acct.limiter {
			delete(a.limiters, lid)
		}
	}
}

// Len is how many accounts are held.
func (a *Accounts) Len() (accounts, limiters int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m), len(a.limiters)
}

// Get returns the account for key, creating it (and its client) on first use; an account
// obtained here without a user is kept until a user of it is released.
func (a *Accounts) Get(key AccountKey) (*Account, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.get(key)
}

func (a *Accounts) get(key AccountKey) (*Account, error) {
	id := key.id()
	if acct, ok := a.m[id]; ok {
		return acct, nil
	}
	p, ok := a.registry[key.Provider]
	if !ok || p.Factory == nil {
		return nil, errUnknownProvider(key.Provider)
	}
	lid := key.limiterID()
	lim := a.limiters[lid]
	// Every HTTP request takes a token, each page of a list too. lim is set below, before the
	// client sends anything.
	pace := func(ctx context.Context) error { return paced(ctx, lim.bucket) }
	var wrap func(http.RoundTripper) http.RoundTripper
	if a.opts.Tracing.Enabled() {
		wrap = a.opts.Tracing.Transport
	}
	c, err := p.Factory.New(providers.Config{APIURL: key.APIURL, Target: key.Target, Settings: key.Settings, Credential: key.Credential, Timeout: a.opts.RequestTimeout, Pace: pace, Now: a.opts.Now, Wrap: wrap})
	if err != nil {
		return nil, err
	}
	caps := c.Capabilities()
	if lim == nil {
		r := a.pace(caps.Rate)
		lim = newLimiter(r, caps.RateLimitBackoff, a.opts.Now, a.opts.Jitter)
		a.limiters[lid] = lim
	}
	acct := &Account{id: id, provider: key.Provider, scope: ScopeKey(key.Provider, key.APIURL, key.Target), client: c, caps: caps, limiter: lim, now: a.opts.Now, metrics: a.metrics}
	a.m[id] = acct
	return acct, nil
}

// pace is the rate one credential is paced at: the options' where set, else what its provider
// documents, else the defaults.
func (a *Accounts) pace(documented providers.Rate) providers.Rate {
	r := documented
	if r.IsZero() {
		r = providers.Rate{PerSecond: DefaultQPS, Burst: DefaultBurst}
	}
	if a.opts.QPS > 0 {
		r.PerSecond = a.opts.QPS
	}
	if a.opts.Burst > 0 {
		r.Burst = a.opts.Burst
	}
	r.Burst = max(r.Burst, 1)
	return r
}

// Account is one provider account. Callers hold Lock while they observe, plan and act.
type Account struct {
	id       string
	provider string
	// scope is what its list covers, without the credential (scopeKey).
	scope   string
	client  providers.Client
	caps    providers.Capabilities
	limiter *limiter
	now     func() time.Time
	metrics *Metrics

	mu        sync.Mutex
	regs      []providers.Registration
	fetchedAt time.Time
	// reads counts the lists read from the provider.
	reads uint64
	valid bool
	// epoch is the time of the account's first list: the origin of its resync grid.
	epoch time.Time
	keys  decide.URLKeys
	// unfitSeen are the unfit registrations already reported (unfitKey), among those the
	// last list held.
	unfitSeen map[string]bool
	// look is the account's shared listing of undelivered events (recovery_look.go); it has a
	// lock of its own, since recovery runs outside the account's.
	look sharedLook
}

// Ops is the view of an account given to one reconcile while it holds the account's lock.
type Ops struct {
	a *Account
	// Before runs ahead of every request to the provider: the session makes its signing
	// Secret writes durable there (session.flush), so the provider never hears of anything
	// that depends on a write still waiting.
	Before func(context.Context) error
}

// Lock serializes observe-plan-act for the account and returns the operations to use meanwhile.
func (a *Account) Lock() (Ops, func()) {
	a.mu.Lock()
	return Ops{a: a}, a.mu.Unlock
}

// Capabilities are the account's provider's.
func (o Ops) Capabilities() providers.Capabilities { return o.a.caps }

// Scope is what the account's list covers, without the credential (scopeKey).
func (o Ops) Scope() string { return o.a.scope }

// FetchedAt is when the cached list was read from the provider (zero when there is none).
func (o Ops) FetchedAt() time.Time { return o.a.fetchedAt }

// Reads counts the lists read from the provider so far: a reconcile that sees it change has read
// the account itself instead of reusing the shared list.
func (o Ops) Reads() uint64 { return o.a.reads }

// Epoch is the time of the account's first list (zero before it): the origin of the resync
// grid that keeps all its subscriptions in one wave.
func (o Ops) Epoch() time.Time { return o.a.epoch }

// URLKeys are the parsed URLs of the account's registrations, for plans made under the lock.
func (o Ops) URLKeys() *decide.URLKeys { return &o.a.keys }

// Invalidate makes the next List read the provider.
func (o Ops) Invalidate() { o.a.valid = false }

// call runs one provider operation (its HTTP requests paced by the credential's bucket) unless
// the credential is waiting out a rate limit, and counts and times it.
func (o Ops) call(ctx context.Context, op string, fn func() error) error {
	if o.Before != nil {
		if err := o.Before(ctx); err != nil {
			return err
		}
	}
	if err := o.a.limiter.blocked(); err != nil {
		if providers.KindOf(err) == providers.RateLimited {
			o.a.metrics.rateLimitWait(o.a.provider)
		}
		return err
	}
	start := time.Now()
	err := o.a.limiter.observe(fn())
	o.a.metrics.observeRequest(o.a.provider, op, time.Since(start), err)
	return err
}

// List returns the account's registrations, from the cache when it is younger than maxAge.
func (o Ops) List(ctx context.Context, maxAge time.Duration) ([]providers.Registration, error) {
	a := o.a
	if a.valid && a.now().Sub(a.fetchedAt) < maxAge {
		return append([]providers.Registration(nil), a.regs...), nil
	}
	var regs []providers.Registration
	err := o.call(ctx, "list", func() (err error) {
		regs, err = a.client.List(ctx)
		return err
	})
	if err != nil {
		a.valid = false
		return nil, err
	}
	out := append([]providers.Registration(nil), regs...)
	for i := range regs {
		regs[i].Secret = "" // the cache never holds secrets (readable ones are read on demand)
	}
	a.regs, a.fetchedAt, a.valid = regs, a.now(), true
	a.reads++
	a.keys.Retain(regs)
	a.retainUnfit(regs)
	if a.epoch.IsZero() {
		a.epoch = a.fetchedAt
	}
	return out, nil
}

// Create registers a webhook and adds it to the cached list.
func (o Ops) Create(ctx context.Context, d providers.Desired, key string) (providers.Registration, error) {
	return o.write(ctx, "create", func() (providers.Registration, error) { return o.a.client.Create(ctx, d, key) })
}

// Update changes a registration in place and refreshes it in the cached list.
func (o Ops) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	return o.write(ctx, "update", func() (providers.Registration, error) { return o.a.client.Update(ctx, id, d) })
}

// write makes op, a request that answers with a registration, and puts that registration in the
// cached list. On an error the outcome is unknown (a timeout may have created or changed it):
// the account is read again next time.
func (o Ops) write(ctx context.Context, op string, fn func() (providers.Registration, error)) (providers.Registration, error) {
	var r providers.Registration
	err := o.call(ctx, op, func() (err error) {
		r, err = fn()
		return err
	})
	if err != nil {
		o.a.valid = false
		return r, err
	}
	o.a.replace(r)
	return r, nil
}

// Delete removes a registration (gone already counts as removed) and drops it from the cache.
func (o Ops) Delete(ctx context.Context, id string) error {
	err := o.call(ctx, "delete", func() error { return o.a.client.Delete(ctx, id) })
	if err != nil {
		o.a.valid = false
		return err
	}
	o.a.remove(id)
	return nil
}

// Ping asks the provider for a test delivery to registration id. ok is false when the provider
// has no such request (not a providers.Pinger).
func (o Ops) Ping(ctx context.Context, id string) (ok bool, err error) {
	p, ok := o.a.client.(providers.Pinger)
	if !ok {
		return false, nil
	}
	return true, o.call(ctx, "ping", func() error { return p.Ping(ctx, id) })
}

// CanPing reports whether the provider can be asked for a test delivery (providers.Pinger).
func (o Ops) CanPing() bool {
	_, ok := o.a.client.(providers.Pinger)
	return ok
}

// VerifierSpec is the provider's description of its verification scheme, when it has one
// (providers.VerifierDescriber).
func (o Ops) VerifierSpec() ([]byte, bool) {
	d, ok := o.a.client.(providers.VerifierDescriber)
	if !ok {
		return nil, false
	}
	return d.VerifierSpec(), true
}

// FetchSecret reads registration id's signing secret from the provider (providers.SecretFetcher).
func (o Ops) FetchSecret(ctx context.Context, id string) (string, error) {
	f, ok := o.a.client.(providers.SecretFetcher)
	if !ok {
		return "", &providers.Error{Kind: providers.Permanent, Message: "the provider cannot read a registration's secret back"}
	}
	var secret string
	err := o.call(ctx, "fetch_secret", func() (err error) {
		secret, err = f.FetchSecret(ctx, id)
		return err
	})
	return secret, err
}

// FirstSighting reports whether the unfit registration r is reported for the first time on
// this account, and counts it then: one odd object is reported once, not once per subscription
// and resync.
func (o Ops) FirstSighting(r providers.Registration) bool {
	a := o.a
	k := unfitKey(r)
	if a.unfitSeen[k] {
		return false
	}
	if a.unfitSeen == nil {
		a.unfitSeen = map[string]bool{}
	}
	a.unfitSeen[k] = true
	a.metrics.unfit.WithLabelValues(a.provider).Inc()
	return true
}

// unfitKey names an unfit registration and its problem (a repaired and broken again object is
// reported again).
func unfitKey(r providers.Registration) string { return r.ID + "\x00" + r.Unfit }

// retainUnfit forgets reported registrations a list no longer shows unfit.
func (a *Account) retainUnfit(regs []providers.Registration) {
	if len(a.unfitSeen) == 0 {
		return
	}
	listed := map[string]bool{}
	for _, r := range regs {
		if r.Unfit != "" {
			listed[unfitKey(r)] = true
		}
	}
	for k := range a.unfitSeen {
		if !listed[k] {
			delete(a.unfitSeen, k)
		}
	}
}

// Remember puts r into the cached list as the current view of that registration.
func (o Ops) Remember(r providers.Registration) { o.a.replace(r) }

func (a *Account) replace(r providers.Registration) {
	r.Secret = "" // the cache never holds secrets
	for i := range a.regs {
		if a.regs[i].ID == r.ID {
			a.regs[i] = r
			return
		}
	}
	a.regs = append([]providers.Registration{r}, a.regs...)
}

func (a *Account) remove(id string) {
	for i := range a.regs {
		if a.regs[i].ID == id {
			a.regs = append(a.regs[:i:i], a.regs[i+1:]...)
			return
		}
	}
}

// ScopeKey names what one provider list covers, without the credential: the provider type, its
// API and the target (a GitHub repository, a REST profile's parameters). Registration ids are
// unique within it.
func ScopeKey(provider, apiURL, target string) string {
	return provider + "\x00" + apiURL + "\x00" + target
}
