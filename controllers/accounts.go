package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hookwarden/hookwarden/providers"
)

// Accounts keeps one entry per provider account (type, API URL, credential). Each entry holds
// the last full list of registrations, a rate limiter shared by every subscription on the
// account, and a lock that serializes observe-plan-act on the account, so two subscriptions
// never plan against each other's half-applied changes.
//
// The list is shared: a subscription that reconciles within maxAge of the last list reuses it,
// and our own writes are applied to the cached list in place. That is what keeps provider list
// calls per resync wave constant in the number of subscriptions.
type Accounts struct {
	registry providers.Registry
	limit    rate.Limit
	burst    int
	timeout  time.Duration
	now      func() time.Time
	metrics  *providerMetrics

	mu sync.Mutex
	m  map[string]*account
}

// AccountOptions tune the per-account client.
type AccountOptions struct {
	// QPS and Burst bound requests to one account (Stripe test mode allows 25/s).
	QPS   float64
	Burst int
	// RequestTimeout bounds one provider request.
	RequestTimeout time.Duration
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// NewAccounts returns an empty account table over the given provider registry.
func NewAccounts(registry providers.Registry, o AccountOptions) *Accounts {
	if o.QPS <= 0 {
		o.QPS = 10
	}
	if o.Burst <= 0 {
		o.Burst = 5
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 20 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Accounts{
		registry: registry, limit: rate.Limit(o.QPS), burst: o.Burst, timeout: o.RequestTimeout, now: o.Now,
		metrics: newProviderMetrics(metrics.Registry), m: map[string]*account{},
	}
}

// accountID names an account without keeping the credential itself.
func accountID(providerType, apiURL, credential string) string {
	h := sha256.Sum256([]byte(providerType + "\x00" + apiURL + "\x00" + credential))
	return providerType + "/" + hex.EncodeToString(h[:8])
}

// errUnknownProvider is returned for a provider type main did not register.
type errUnknownProvider string

func (e errUnknownProvider) Error() string { return "provider type " + string(e) + " is not supported" }

// Get returns the account for the given provider type, API URL and credential, creating it
// (and its client) on first use.
func (a *Accounts) Get(providerType, apiURL, credential string) (*account, error) {
	id := accountID(providerType, apiURL, credential)
	a.mu.Lock()
	defer a.mu.Unlock()
	if acct, ok := a.m[id]; ok {
		return acct, nil
	}
	f, ok := a.registry[providerType]
	if !ok {
		return nil, errUnknownProvider(providerType)
	}
	c, err := f.New(providers.Config{APIURL: apiURL, Credential: credential, Timeout: a.timeout})
	if err != nil {
		return nil, err
	}
	acct := &account{id: id, provider: providerType, client: c, limiter: rate.NewLimiter(a.limit, a.burst), now: a.now, metrics: a.metrics}
	a.m[id] = acct
	return acct, nil
}

// account is one provider account. Callers hold Lock while they observe, plan and act.
type account struct {
	id       string
	provider string
	client   providers.Client
	limiter  *rate.Limiter
	now      func() time.Time
	metrics  *providerMetrics

	mu        sync.Mutex
	regs      []providers.Registration
	fetchedAt time.Time
	valid     bool
	// epoch is the time of the account's first list: the origin of its resync grid.
	epoch time.Time
}

// ops is the view of an account given to one reconcile while it holds the account's lock.
type ops struct{ a *account }

// Lock serializes observe-plan-act for the account and returns the operations to use meanwhile.
func (a *account) Lock() (ops, func()) {
	a.mu.Lock()
	return ops{a}, a.mu.Unlock
}

// FetchedAt is when the cached list was read from the provider (zero when there is none).
func (o ops) FetchedAt() time.Time { return o.a.fetchedAt }

// Epoch is the time of the account's first list (zero before it): the origin of the resync
// grid that keeps all its subscriptions in one wave.
func (o ops) Epoch() time.Time { return o.a.epoch }

// List returns the account's registrations, from the cache when it is younger than maxAge.
func (o ops) List(ctx context.Context, maxAge time.Duration) ([]providers.Registration, error) {
	a := o.a
	if a.valid && a.now().Sub(a.fetchedAt) < maxAge {
		return append([]providers.Registration(nil), a.regs...), nil
	}
	if err := a.limiter.Wait(ctx); err != nil {
		return nil, err
	}
	regs, err := a.client.List(ctx)
	a.metrics.observe(a.provider, "list", err)
	if err != nil {
		a.valid = false
		return nil, err
	}
	a.regs, a.fetchedAt, a.valid = regs, a.now(), true
	if a.epoch.IsZero() {
		a.epoch = a.fetchedAt
	}
	return append([]providers.Registration(nil), regs...), nil
}

// Create registers a webhook and adds it to the cached list.
func (o ops) Create(ctx context.Context, d providers.Desired, key string) (providers.Registration, error) {
	if err := o.a.limiter.Wait(ctx); err != nil {
		return providers.Registration{}, err
	}
	r, err := o.a.client.Create(ctx, d, key)
	o.a.metrics.observe(o.a.provider, "create", err)
	if err != nil {
		// The outcome is unknown (a timeout may have created it): read the account again next time.
		o.a.valid = false
		return r, err
	}
	o.a.replace(r)
	return r, nil
}

// Update changes a registration in place and refreshes it in the cached list.
func (o ops) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	if err := o.a.limiter.Wait(ctx); err != nil {
		return providers.Registration{}, err
	}
	r, err := o.a.client.Update(ctx, id, d)
	o.a.metrics.observe(o.a.provider, "update", err)
	if err != nil {
		o.a.valid = false
		return r, err
	}
	o.a.replace(r)
	return r, nil
}

// Delete removes a registration (gone already counts as removed) and drops it from the cache.
func (o ops) Delete(ctx context.Context, id string) error {
	if err := o.a.limiter.Wait(ctx); err != nil {
		return err
	}
	err := o.a.client.Delete(ctx, id)
	o.a.metrics.observe(o.a.provider, "delete", err)
	if err != nil {
		o.a.valid = false
		return err
	}
	o.a.remove(id)
	return nil
}

// Remember puts r into the cached list as the current view of that registration.
func (o ops) Remember(r providers.Registration) { o.a.replace(r) }

func (a *account) replace(r providers.Registration) {
	r.Secret = "" // the cache never holds secrets
	for i := range a.regs {
		if a.regs[i].ID == r.ID {
			a.regs[i] = r
			return
		}
	}
	a.regs = append([]providers.Registration{r}, a.regs...)
}

func (a *account) remove(id string) {
	for i := range a.regs {
		if a.regs[i].ID == id {
			a.regs = append(a.regs[:i:i], a.regs[i+1:]...)
			return
		}
	}
}
