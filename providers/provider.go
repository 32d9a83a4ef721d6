// Package providers defines the contract between the reconciler and one webhook provider API.
//
// A provider package sees plain Go values, never custom resources, and classifies every error it
// returns at the boundary (see Error), so the reconciler can decide between requeue, backoff and
// stall without knowing the provider.
package providers

import (
	"context"
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
	// Owner is the decoded ownership marker; zero when the registration carries none.
	Owner Owner
	// CreateKey is the idempotency key the registration was created with, when the provider
	// stores it (Stripe: in metadata). Replaying a create with it recovers a lost secret.
	CreateKey string
	// Secret is the signing secret. Stripe returns it only in the create response (and in an
	// idempotent replay of that response); it is empty everywhere else.
	Secret  string
	Created time.Time
}

// Desired is what a registration should look like.
type Desired struct {
	URL         string
	Events      []string
	Description string
	Disabled    bool
	Owner       Owner
}

// Client talks to one provider account (or one GitHub target). Implementations are safe for
// concurrent use.
type Client interface {
	// List returns every registration on the account, following all pages.
	List(ctx context.Context) ([]Registration, error)
	// Create registers a webhook. idempotencyKey is deterministic per attempt: repeating the call
	// with the same key and the same Desired replays the original response, secret included.
	Create(ctx context.Context, d Desired, idempotencyKey string) (Registration, error)
	// Update changes a registration in place (URL, events, description, disabled, marker); it
	// never rotates the secret.
	Update(ctx context.Context, id string, d Desired) (Registration, error)
	// Delete removes a registration; a registration that is already gone is not an error.
	Delete(ctx context.Context, id string) error
}

// Config is what a Factory needs to build a Client for one account.
type Config struct {
	// APIURL overrides the provider's default API base URL (stripe-mock, fakes, GitHub Enterprise).
	APIURL string
	// Credential is the API key or token. It must never appear in logs or errors.
	Credential string
	// Timeout bounds one HTTP request.
	Timeout time.Duration
}

// Factory builds a Client for one account.
type Factory interface {
	New(cfg Config) (Client, error)
}

// FactoryFunc adapts a function to Factory.
type FactoryFunc func(cfg Config) (Client, error)

// New calls f.
func (f FactoryFunc) New(cfg Config) (Client, error) { return f(cfg) }

// Registry maps a provider type (as spelled in spec.provider.type) to its Factory. main builds it
// and passes it to the reconciler; there is no global registry.
type Registry map[string]Factory
