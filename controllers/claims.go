package controllers

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// Two subscriptions never own one registration. Whatever made them (an import of a registration
// a subscription already manages, two manifests for one URL on a provider without markers),
// the second to claim a registration stalls, naming the first, instead of setting a new secret
// on it (which breaks the first one's verification) or deleting it when it is deleted.
//
// A subscription claims the registration its status records (status.endpointID), and, from the
// moment this manager kept it for the subscription, the one it kept (before the status write
// reaches the cache). Of two claimants of one registration the one that claimed it first wins:
// one that records it over one that does not, and between two that record it (a state left by
// an older manager) the older subscription.

// claimIndex indexes subscriptions by the registration their status records, on the account
// scope their spec names (claimKey).
const claimIndex = "status.endpointID"

// claimant is a subscription claiming a registration.
type claimant struct {
	key     string // namespace/name
	created time.Time
}

func claimantOf(sub *hookv1.WebhookSubscription) claimant {
	return claimant{key: subscriptionKey(sub), created: sub.CreationTimestamp.Time}
}

// before orders claimants by age, then name: the first one wins.
func (c claimant) before(o claimant) bool {
	if !c.created.Equal(o.created) {
		return c.created.Before(o.created)
	}
	return c.key < o.key
}

func claimKey(scope, id string) string { return scope + "\x00" + id }

// claimKeyOf is the index value of sub: its recorded registration on its scope (none when it
// records none or its provider block does not parse).
func (r *Reconciler) claimKeyOf(sub *hookv1.WebhookSubscription) []string {
	if sub.Status.EndpointID == "" {
		return nil
	}
	scope, err := decide.ProviderScope(&sub.Spec.Provider, sub.Spec.Events, r.Accounts.Registry())
	if err != nil {
		return nil
	}
	return []string{claimKey(account.ScopeKey(string(sub.Spec.Provider.Type), sub.Spec.Provider.APIURL, scope.Target), sub.Status.EndpointID)}
}

// claimBook is what this manager kept for each subscription, by scope and registration id: it
// covers the moment between a reconcile that adopted a registration and its status write
// reaching the cache, when another subscription on the account may plan already.
type claimBook struct {
	mu    sync.Mutex
	byKey map[string]map[string]claimant // claimKey -> subscription key -> claimant
	bySub map[string]string              // subscription key -> claimKey
}

func (b *claimBook) claim(key string, c claimant) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(c.key)
	if b.byKey == nil {
		b.byKey, b.bySub = map[string]map[string]claimant{}, map[string]string{}
	}
	if b.byKey[key] == nil {
		b.byKey[key] = map[string]claimant{}
	}
	b.byKey[key][c.key] = c
	b.bySub[c.key] = key
}

// release forgets the claim of subscription sub (it is gone).
func (b *claimBook) release(sub string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drop(sub)
}

func (b *claimBook) drop(sub string) {
	key, ok := b.bySub[sub]
	if !ok {
		return
	}
	delete(b.bySub, sub)
	delete(b.byKey[key], sub)
	if len(b.byKey[key]) == 0 {
		delete(b.byKey, key)
	}
}

func (b *claimBook) claimants(key string) []claimant {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]claimant, 0, len(b.byKey[key]))
	for _, c := range b.byKey[key] {
		out = append(out, c)
	}
	return out
}

// claimantsOf returns the subscriptions that claim registration id on scope: those whose status
// records it (the manager's cache, through claimIndex; the command line's list, Subscriptions)
// and those this manager kept it for.
func (r *Reconciler) claimantsOf(ctx context.Context, scope, id string) ([]claimant, error) {
	key := claimKey(scope, id)
	out := r.claims.claimants(key)
	var subs []hookv1.WebhookSubscription
	if r.Client != nil {
		var list hookv1.WebhookSubscriptionList
		if err := r.List(ctx, &list, client.MatchingFields{claimIndex: key}); err != nil {
			return nil, fmt.Errorf("listing the subscriptions that record registration %s: %w", id, err)
		}
		subs = list.Items
	} else {
		for i := range r.Subscriptions {
			if ks := r.claimKeyOf(&r.Subscriptions[i]); len(ks) == 1 && ks[0] == key {
				subs = append(subs, r.Subscriptions[i])
			}
		}
	}
	for i := range subs {
		out = append(out, claimantOf(&subs[i]))
	}
	return out, nil
}

// claimedBy returns, for each of ids, the subscription other than sub that owns it ("" where
// none does): see firstClaimant.
func (r *Reconciler) claimedBy(ctx context.Context, sub *hookv1.WebhookSubscription, scope string, ids []string) (map[string]string, error) {
	var out map[string]string
	me := claimantOf(sub)
	for _, id := range ids {
		cs, err := r.claimantsOf(ctx, scope, id)
		if err != nil {
			return nil, err
		}
		if owner := firstClaimant(me, sub.Status.EndpointID == id, cs); owner != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[id] = owner
		}
	}
	return out, nil
}

// firstClaimant decides who owns a registration that claimants claim, for me, who records it
// or not (mine): "" when it may be mine (nobody else claims it, or I claimed it first), else
// the subscription that claimed it first. A claimant with my key is me.
func firstClaimant(me claimant, mine bool, claimants []claimant) string {
	others := make([]claimant, 0, len(claimants))
	for _, c := range claimants {
		if c.key == me.key {
			mine = true
			continue
		}
		others = append(others, c)
	}
	if len(others) == 0 {
		return ""
	}
	sort.Slice(others, func(i, j int) bool { return others[i].before(others[j]) })
	if mine && me.before(others[0]) {
		return ""
	}
	return others[0].key
}

// contested are the observed registrations whose owner matters to a plan: those serving the
// desired target, and those the subscription would otherwise prove its own (to keep, update,
// prune or delete).
func contested(in decide.PlanInput) []string {
	own := in.Ownership()
	own.ClaimedBy = nil
	var ids []string
	for _, r := range in.Observed {
		if r.ID == "" {
			continue
		}
		if k := in.Keys.Get(r.URL); (k.CanonicalOK && k.Canonical == in.Desired.URL) || own.Proves(r) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// claimedInput is in with the claims of other subscriptions on its contested registrations.
func (s *session) claimedInput(ctx context.Context, in decide.PlanInput) (decide.PlanInput, error) {
	claimed, err := s.r.claimedBy(ctx, s.sub, s.ops.Scope(), contested(in))
	in.ClaimedBy = claimed
	return in, err
}

// keptFor records that this manager kept registration id for sub: it claims it from now on.
func (r *Reconciler) keptFor(sub *hookv1.WebhookSubscription, scope, id string) {
	if id != "" {
		r.claims.claim(claimKey(scope, id), claimantOf(sub))
	}
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
func (r *Reconciler) Owners(tmpl *hookv1.WebhookSubscription, regs []providers.Registration, subs []hookv1.WebhookSubscription, held func(*hookv1.WebhookSubscription) (map[string]bool, error)) (map[string]Owned, error) {
	scope, err := decide.ProviderScope(&tmpl.Spec.Provider, tmpl.Spec.Events, r.Accounts.Registry())
	if err != nil {
		return nil, err
	}
	want := account.ScopeKey(string(tmpl.Spec.Provider.Type), tmpl.Spec.Provider.APIURL, scope.Target)
	keys := &decide.URLKeys{}
	out := map[string]Owned{}
	for _, reg := range regs {
		if o := reg.Owner; !o.IsZero() && o.Cluster == r.ClusterName {
			out[reg.ID] = Owned{Subscription: o.Namespace + "/" + o.Name, Proof: decide.ProofMarker}
		}
	}
	for i := range subs {
		sub := &subs[i]
		s, err := decide.ProviderScope(&sub.Spec.Provider, sub.Spec.Events, r.Accounts.Registry())
		if err != nil || account.ScopeKey(string(sub.Spec.Provider.Type), sub.Spec.Provider.APIURL, s.Target) != want {
			continue
		}
		h, err := held(sub)
		if err != nil {
			return nil, err
		}
		// Every proof, on any provider: markers are looked at above.
		own := decide.Ownership{Me: r.owner(sub), RecordedID: sub.Status.EndpointID, Held: h, ReceiverURL: servedReceiverURL(r, sub), Keys: keys}
		served := servedURL(sub)
		for _, reg := range regs {
			if prev, ok := out[reg.ID]; ok && !prev.Twin {
				continue
			}
			if p := own.Proof(reg); p != "" {
				out[reg.ID] = Owned{Subscription: subscriptionKey(sub), Proof: p}
			} else if k := keys.Get(reg.URL); served != "" && k.CanonicalOK && k.Canonical == served {
				if _, ok := out[reg.ID]; !ok {
					out[reg.ID] = Owned{Subscription: subscriptionKey(sub), Proof: "it serves this URL", Twin: true}
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
func servedReceiverURL(r *Reconciler, sub *hookv1.WebhookSubscription) string {
	if sub.Spec.Endpoint.Receiver == nil {
		return ""
	}
	if u := r.ownReceiverURL(sub); u != "" {
		return u
	}
	return sub.Status.URL
}
