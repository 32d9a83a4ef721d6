package account

import (
	"bytes"
	"context"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// The command line's view of a reconcile: what the manager would do, read and planned exactly
// as the manager plans, and nothing written (no provider write, no Secret, no status, no event).

// Preview plans sub as a reconcile would, from observed (a list of its account, ObserveList's),
// the signing Secret read through o.API, and the claims of subs (the cluster's
// subscriptions: the registrations their status records are theirs). sub's status (endpointID,
// url) and UID are what the plan reads as recorded: for a subscription not yet in the cluster,
// leave them empty. Every round is planned (decide.PreviewRounds).
func (o *Observer) Preview(ctx context.Context, sub *hookv1.WebhookSubscription, observed []providers.Registration, subs []hookv1.WebhookSubscription) (decide.Preview, error) {
	ob, err := o.Observe(ctx, sub)
	if err != nil {
		return decide.Preview{}, err
	}
	signing, err := o.readSigningState(ctx, sub)
	if err != nil {
		return decide.Preview{}, err
	}
	rotate, err := o.PendingRotation(ctx, sub, true)
	if err != nil {
		return decide.Preview{}, err
	}
	ops, unlock := ob.Account.Lock()
	defer unlock()
	in := Planned{Sub: sub, Desired: ob.Desired, Signing: signing, OwnReceiverURL: ob.OwnReceiverURL, Rotate: rotate != ""}.Input(ops, observed, decide.Rounds{})
	if in.ClaimedBy, err = o.claimedIn(sub, ops.Scope(), in.Contested(), subs); err != nil {
		return decide.Preview{}, err
	}
	out := decide.PreviewRounds(in)
	out.Provider = string(sub.Spec.Provider.Type)
	return out, nil
}

// ObserveList lists the registrations on the account sub's provider block names (fresh,
// read-only), reached as the manager reaches it (credentials from the Secret the block names,
// the same client and pacing), with the provider's capabilities: what `hookwarden import`
// reads. Only sub's namespace, provider block and events are used.
func (o *Observer) ObserveList(ctx context.Context, sub *hookv1.WebhookSubscription) ([]providers.Registration, providers.Capabilities, error) {
	acct, err := o.Reach(ctx, sub)
	if err != nil {
		return nil, providers.Capabilities{}, err
	}
	ops, unlock := acct.Lock()
	defer unlock()
	regs, err := List(ctx, ops, 0)
	return regs, ops.Capabilities(), err
}

// readSigningState reads sub's signing Secret from the API server (absent: nothing held).
func (o *Observer) readSigningState(ctx context.Context, sub *hookv1.WebhookSubscription) (SigningState, error) {
	sec, err := ReadSigningSecret(ctx, o.API, sub)
	if err != nil {
		return SigningState{}, err
	}
	return ParseSigningState(sec, sub), nil
}

// ClaimKey is a registration id on an account scope (ScopeKey): what a subscription's status
// claims.
func ClaimKey(scope, id string) string { return scope + "\x00" + id }

// ClaimKeyOf is sub's claim: its recorded registration on its scope (none when it records none
// or its provider block does not parse).
func ClaimKeyOf(sub *hookv1.WebhookSubscription, registry providers.Registry) []string {
	if sub.Status.EndpointID == "" {
		return nil
	}
	scope, err := decide.ProviderScope(&sub.Spec.Provider, sub.Spec.Events, registry)
	if err != nil {
		return nil
	}
	return []string{ClaimKey(ScopeKey(string(sub.Spec.Provider.Type), sub.Spec.Provider.APIURL, scope.Target), sub.Status.EndpointID)}
}

// ClaimantOf is sub as a claimant of a registration.
func ClaimantOf(sub *hookv1.WebhookSubscription) decide.Claimant {
	return decide.Claimant{Key: SubscriptionKey(sub), Created: sub.CreationTimestamp.Time}
}

// claimedIn returns, for each of ids on scope, the subscription of subs other than sub that
// owns it, by what their statuses record (decide.ClaimedBy).
func (o *Observer) claimedIn(sub *hookv1.WebhookSubscription, scope string, ids []string, subs []hookv1.WebhookSubscription) (map[string]string, error) {
	return decide.ClaimedBy(ClaimantOf(sub), sub.Status.EndpointID, ids, func(id string) ([]decide.Claimant, error) {
		key := ClaimKey(scope, id)
		var out []decide.Claimant
		for i := range subs {
			if ks := ClaimKeyOf(&subs[i], o.Accounts.Registry()); len(ks) == 1 && ks[0] == key {
				out = append(out, ClaimantOf(&subs[i]))
			}
		}
		return out, nil
	})
}

// Owned says which subscription of this cluster already answers for a registration, and how.
type Owned struct {
	// Subscription is its namespace/name.
	Subscription string `json:"subscription"`
	// Proof is what makes it that subscription's (its marker, its recorded id, its held
	// secret, its bundled-receiver URL), or, for Twin, that it serves the registration's URL.
	Proof string `json:"proof"`
	// Twin: not that subscription's own, but a twin of its registration (same canonical URL on
	// the account): its manager prunes it (a marked provider) or reports it.
	Twin bool `json:"twin,omitempty"`
}

// Owners tells, for registrations regs of the account tmpl's provider block names, which are
// already this cluster's, by id: `hookwarden import` skips them. A registration is owned by
// every proof the manager uses, whatever the provider: this cluster's marker, a subscription's
// recorded id, its signing Secret holding the secret, its bundled-receiver URL; and one whose
// URL a subscription on the account serves is that subscription's twin. subs are the cluster's
// subscriptions; held returns the ids whose secrets a subscription's signing Secret holds (it
// is asked only for the subscriptions on tmpl's account).
func (o *Observer) Owners(tmpl *hookv1.WebhookSubscription, regs []providers.Registration, subs []hookv1.WebhookSubscription, held func(*hookv1.WebhookSubscription) (map[string]bool, error)) (map[string]Owned, error) {
	registry := o.Accounts.Registry()
	scope, err := decide.ProviderScope(&tmpl.Spec.Provider, tmpl.Spec.Events, registry)
	if err != nil {
		return nil, err
	}
	want := ScopeKey(string(tmpl.Spec.Provider.Type), tmpl.Spec.Provider.APIURL, scope.Target)
	keys := &decide.URLKeys{}
	out := map[string]Owned{}
	for _, reg := range regs {
		if m := reg.Owner; !m.IsZero() && m.Cluster == o.ClusterName {
			out[reg.ID] = Owned{Subscription: m.Namespace + "/" + m.Name, Proof: decide.ProofMarker}
		}
	}
	for i := range subs {
		sub := &subs[i]
		s, err := decide.ProviderScope(&sub.Spec.Provider, sub.Spec.Events, registry)
		if err != nil || ScopeKey(string(sub.Spec.Provider.Type), sub.Spec.Provider.APIURL, s.Target) != want || !bytes.Equal(s.Settings, scope.Settings) {
			// Another account, or another client of it (its settings differ, as the manager's
			// account key says): a Stripe v1 subscription does not serve the URL of a v2
			// destination, whose twin it is not.
			continue
		}
		h, err := held(sub)
		if err != nil {
			return nil, err
		}
		// Every proof, on any provider: markers are looked at above.
		own := decide.Ownership{Me: o.Owner(sub), RecordedID: sub.Status.EndpointID, Held: h, ReceiverURL: o.servedReceiverURL(sub), Keys: keys}
		served := servedURL(sub)
		for _, reg := range regs {
			if prev, ok := out[reg.ID]; ok && !prev.Twin {
				continue
			}
			if p := own.Proof(reg); p != "" {
				out[reg.ID] = Owned{Subscription: SubscriptionKey(sub), Proof: p}
			} else if k := keys.Get(reg.URL); served != "" && k.CanonicalOK && k.Canonical == served {
				if _, ok := out[reg.ID]; !ok {
					out[reg.ID] = Owned{Subscription: SubscriptionKey(sub), Proof: "it serves this URL", Twin: true}
				}
			}
		}
	}
	return out, nil
}

// servedURL is the canonical URL sub serves: as last recorded, else its spec's ("" unknown).
func servedURL(sub *hookv1.WebhookSubscription) string {
	if sub.Status.URL != "" {
		return sub.Status.URL
	}
	if u, err := matching.Canonical(sub.Spec.Endpoint.URL); err == nil && sub.Spec.Endpoint.Receiver == nil {
		return u
	}
	return ""
}

// servedReceiverURL is sub's bundled-receiver URL ("" when it names none, or it is not known:
// without the manager's base URL, the one its status recorded).
func (o *Observer) servedReceiverURL(sub *hookv1.WebhookSubscription) string {
	if sub.Spec.Endpoint.Receiver == nil {
		return ""
	}
	if u := o.ReceiverURL(sub); u != "" {
		return u
	}
	return sub.Status.URL
}
