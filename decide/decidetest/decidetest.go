// Package decidetest builds the plan inputs, registrations and steps that decide's table tests
// and the manager's executor tests are written in: one subscription (shop/orders in cluster
// prod), registrations derived from one that matches it, steps as plans list them.
package decidetest

import (
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// StripeCaps are the capabilities of the provider most cases are written for.
var StripeCaps = new(stripe.Client).Capabilities()

// The subscription every plan case is written from: shop/orders in cluster prod.
var (
	Me           = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "uid-orders-2"}
	EarlierMe    = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "orders", UID: "uid-orders-1"}
	OtherSub     = providers.Owner{Cluster: "prod", Namespace: "shop", Name: "refunds", UID: "uid-refunds"}
	OtherCluster = providers.Owner{Cluster: "staging", Namespace: "shop", Name: "orders", UID: "uid-staging-orders"}
	T0           = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// The URLs and description the cases use: the spec's, an older one of the spec's, another
// subscription's.
const (
	URL         = "https://hooks.example.com/hooks/shop/orders"
	OldURL      = "https://hooks.example.com/hooks/shop/orders-v1"
	ElseURL     = "https://other.example.com/hooks/billing"
	Description = "orders pipeline"
)

// Events are the spec's events.
var Events = []string{"checkout.session.completed", "invoice.paid"}

// Desired is the spec for url.
func Desired(url string) providers.Desired {
	return providers.Desired{URL: url, Events: Events, Description: Description, Owner: Me}
}

// Reg is a registration that matches the desired one exactly (ours, canonical URL, same fields),
// created minutesAfterT0 after T0. Cases derive every other category from it with options.
func Reg(id string, minutesAfterT0 int, opts ...func(*providers.Registration)) providers.Registration {
	r := providers.Registration{
		ID:          id,
		URL:         URL,
		Events:      append([]string(nil), Events...),
		Description: Description,
		Owner:       Me,
		CreateKey:   "hookwarden-create-" + Me.UID + "-g1",
		Created:     T0.Add(time.Duration(minutesAfterT0) * time.Minute),
	}
	for _, o := range opts {
		o(&r)
	}
	return r
}

// WithURL, WithOwner, WithEvents, WithDescription, WithDisabled and WithHealthDisabled change
// one field of a Reg.
func WithURL(u string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.URL = u }
}

// WithOwner sets the ownership marker.
func WithOwner(o providers.Owner) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Owner = o }
}

// WithEvents sets the events.
func WithEvents(e ...string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Events = e }
}

// WithDescription sets the description.
func WithDescription(d string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Description = d }
}

// WithVariant makes it another kind of registration of the same provider (Registration.Variant).
func WithVariant(v string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Variant = v }
}

// WithDisabled disables the registration.
func WithDisabled(r *providers.Registration) { r.Disabled = true }

// WithHealthDisabled is a registration the provider disabled after failed deliveries.
func WithHealthDisabled(r *providers.Registration) {
	r.Health = &providers.DeliveryHealth{State: providers.HealthDisabled, Message: "disabled by the provider"}
}

// Unmarked is a registration with no ownership marker (made by hand, or by another tool).
func Unmarked(r *providers.Registration) { r.Owner = providers.Owner{}; r.CreateKey = "" }

// Kept is r as a plan's Keep.
func Kept(r providers.Registration) *providers.Registration { return &r }

// Twin, Stale and Retired are prune steps. Steps as plans list them. Their Desired and Key are compared only where a case says so
// (StepDetail); everywhere else the kind and the registration acted on tell the decision.
func Twin(r providers.Registration) decide.Step { return decide.PruneStep(r, decide.PruneTwin) }

// Stale prunes r as stale.
func Stale(r providers.Registration) decide.Step { return decide.PruneStep(r, decide.PruneStale) }

// Retired prunes r as replaced by an earlier round.
func Retired(r providers.Registration) decide.Step {
	return decide.PruneStep(r, decide.PruneRotated)
}

// CreateStep is a create (Desired, Key and Secret left to the case).
func CreateStep() decide.Step { return decide.Step{Kind: decide.StepCreate} }

// UpdateStep updates r in place, fields drifted.
func UpdateStep(r providers.Registration, fields ...string) decide.Step {
	return decide.Step{Kind: decide.StepUpdate, Registration: r, Desired: Desired(URL), Drift: fields}
}

// ReplayStep replays r's create.
func ReplayStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepReplay, Registration: r}
}

// FetchStep reads r's secret back.
func FetchStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepFetchSecret, Registration: r}
}

// SetSecretStep sets a new secret on r.
func SetSecretStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepSetSecret, Registration: r, Desired: Desired(URL)}
}

// ReplaceStep replaces r (fields: what cannot change in place).
func ReplaceStep(r providers.Registration, fields ...string) decide.Step {
	return decide.Step{Kind: decide.StepReplace, Registration: r, Drift: fields}
}

// MarkStep makes r's secret current.
func MarkStep(r providers.Registration) decide.Step {
	return decide.Step{Kind: decide.StepMarkCurrent, Registration: r}
}

// ForgetStep forgets a vanished registration's secret.
func ForgetStep(id string) decide.Step { return decide.Step{Kind: decide.StepForget, ID: id} }

// Keeps is a plan that keeps r with steps.
func Keeps(r providers.Registration, steps ...decide.Step) decide.Plan {
	return decide.Plan{Decision: decide.Keep, Keep: Kept(r), Steps: steps}
}

// KeepsUpdating is a plan that keeps r and updates it in place, fields drifted.
func KeepsUpdating(r providers.Registration, fields ...string) decide.Plan {
	return Keeps(r, UpdateStep(r, fields...))
}

// Creates is a plan that creates, then steps.
func Creates(steps ...decide.Step) decide.Plan {
	return decide.Plan{Decision: decide.Create, Steps: append([]decide.Step{CreateStep()}, steps...)}
}

// StepDetail leaves out of a comparison what most cases do not state: the parameters and
// keys of provider calls, and how a new secret is obtained.
var StepDetail = cmpopts.IgnoreFields(decide.Step{}, "Desired", "Key", "Secret")

// HeldSet turns a case's held ids into the plan's set (nil stays nil).
func HeldSet(ids []string) map[string]bool {
	if ids == nil {
		return nil
	}
	held := map[string]bool{}
	for _, id := range ids {
		held[id] = true
	}
	return held
}

// CurrentOf is the id a consistent signing Secret names current: the recorded registration's,
// when its secret is held; a case's explicit current wins.
func CurrentOf(explicit, recorded string, held []string) string {
	if explicit != "" {
		return explicit
	}
	for _, id := range held {
		if id == recorded {
			return recorded
		}
	}
	return ""
}

// MarkerlessCaps are those of a provider like GitHub: no marker, a secret the client chooses and
// resends on every update, and no description.
var MarkerlessCaps = providers.Capabilities{
	Secret:            providers.SecretClientChosen,
	UpdateNeedsSecret: true,
	Fields:            providers.FieldDisabled,
}

// ReceiverURL is the subscription's bundled-receiver URL.
const ReceiverURL = "https://hooks.example.com/base/hooks/shop/orders"

// Hook is a registration as a provider without markers reports it: matching the desired one
// (URL, events), with no owner, no create key and no description.
func Hook(id string, minutesAfterT0 int, opts ...func(*providers.Registration)) providers.Registration {
	r := Reg(id, minutesAfterT0, Unmarked, WithDescription(""))
	for _, o := range opts {
		o(&r)
	}
	return r
}

// Misconfigured is a registration whose provider-specific fields are off.
func Misconfigured(fields ...string) func(*providers.Registration) {
	return func(r *providers.Registration) { r.Misconfigured = fields }
}

// The recovery cases' clock, recovery capabilities of each mode and delivery health.
var (
	RecNow        = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	FetchCaps     = providers.RecoveryCapabilities{Mode: providers.RecoveryFetch, Window: 30 * 24 * time.Hour}
	RedeliverCaps = providers.RecoveryCapabilities{Mode: providers.RecoveryRedeliver, Window: 72 * time.Hour}
	PollCaps      = providers.RecoveryCapabilities{Mode: providers.RecoveryRedeliver, Window: 7 * 24 * time.Hour, Poll: true}
	RangeCaps     = providers.RecoveryCapabilities{Mode: providers.RecoveryRange, Window: 14 * 24 * time.Hour}
	NoneCaps      = providers.RecoveryCapabilities{}
	FailingNow    = providers.DeliveryHealth{State: providers.HealthFailing, Failed: 3, Total: 3, Since: RecNow.Add(-2 * time.Hour)}
	DisabledNow   = providers.DeliveryHealth{State: providers.HealthDisabled}
)
