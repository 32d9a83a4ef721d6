package decide

import (
	"fmt"
	"strings"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// How the plan tells ours from adoptable, stale, foreign and the rest, and the words it uses
// when it will not act.

// relation classifies one observed registration against the desired one.
type relation int

const (
	foreign      relation = iota // not ours: never changed or deleted
	candidate                    // serves the desired target and is ours or adoptable
	stale                        // ours, for a URL the spec no longer names
	nearTwin                     // foreign, same loose key: reported
	conflicting                  // same target but provably someone else's (or adoption refused)
	unproven                     // no markers: same URL and events, not provably ours
	lookalike                    // no markers: same URL, other events, not provably ours
	retired                      // replaced by an earlier round of this reconcile
	unfitOurs                    // ours, but its object does not fit the provider's shape
	unfitForeign                 // not provably ours, and its object does not fit
	claimed                      // serves the desired target, owned by another subscription here
)

// Ownership is the evidence that decides whether a registration is this subscription's.
type Ownership struct {
	Me         providers.Owner
	Markers    bool
	RecordedID string
	Held       map[string]bool
	// ReceiverURL is the canonical bundled-receiver URL that encodes this subscription.
	ReceiverURL string
	Keys        *URLKeys
	// claimedBy are the registrations another subscription of this cluster owns (its status
	// records it, or this manager kept it for it first), by id: never this one's, whatever
	// else would prove it.
	ClaimedBy map[string]string
}

// Ownership is the evidence in the plan's input that proves a registration ours.
func (in PlanInput) Ownership() Ownership {
	return Ownership{Me: in.Desired.Owner, Markers: in.Caps.Markers, RecordedID: in.RecordedID, Held: in.HeldSecrets, ReceiverURL: in.ReceiverURL, Keys: in.Keys, ClaimedBy: in.ClaimedBy}
}

// owns is the proof of ownership that lets reconcile and deletion change or delete r.
//
// Where the provider stores markers, a marker decides: ours, or an earlier incarnation of this
// subscription whose id we recorded; another owner's marker is never overridden. An unmarked
// registration is ours only when we recorded its id.
//
// Where the provider cannot store a marker, r is ours when we recorded its id, when the signing
// Secret (owned by the subscription, so this survives a wiped status) holds its secret, or when
// its URL is the bundled receiver's URL for this subscription. Nothing else is proof.
func (o Ownership) Owns(r providers.Registration) bool {
	if o.ClaimedBy[r.ID] != "" {
		return false
	}
	return o.Proves(r)
}

// proves is owns without the claims of other subscriptions.
func (o Ownership) Proves(r providers.Registration) bool { return o.Proof(r) != "" }

// Proofs of ownership, as messages name them.
const (
	ProofMarker   = "its ownership marker"
	ProofRecorded = "its status records it"
	ProofHeld     = "its signing Secret holds its secret"
	ProofReceiver = "its URL is the subscription's bundled-receiver URL"
)

// proof is what proves r this subscription's ("" for nothing).
func (o Ownership) Proof(r providers.Registration) string {
	recorded := o.RecordedID != "" && r.ID == o.RecordedID
	if o.Markers {
		switch {
		case r.Owner.IsZero() && recorded, !r.Owner.IsZero() && recorded && sameName(r.Owner, o.Me):
			return ProofRecorded
		case !r.Owner.IsZero() && Marked(r, o.Me):
			return ProofMarker
		}
		return ""
	}
	switch {
	case recorded:
		return ProofRecorded
	case o.Held[r.ID]:
		return ProofHeld
	case o.ReceiverURL == "":
		return ""
	}
	if k := o.Keys.Get(r.URL); k.CanonicalOK && k.Canonical == o.ReceiverURL {
		return ProofReceiver
	}
	return ""
}

func classify(in PlanInput, own Ownership, r providers.Registration, desiredLoose string) relation {
	if r.Variant != in.Caps.Variant {
		// Another kind of registration of this provider (a Stripe v2 event destination beside
		// v1 endpoints): it serves another subscription's spec even on the same URL, so it is
		// never a match, a twin or stale here.
		return foreign
	}
	if r.Unfit != "" {
		// What could be read may still prove it ours (its recorded id, a held secret, a
		// marker); nothing can be compared with the spec, and nothing is changed.
		if r.ID != "" && own.Owns(r) {
			return unfitOurs
		}
		return unfitForeign
	}
	ours := own.Owns(r)
	k := in.Keys.Get(r.URL)
	sameTarget := k.CanonicalOK && k.Canonical == in.Desired.URL
	switch {
	case in.Rounds.Retired[r.ID]:
		// Only a registration this reconcile kept (ours, or adopted) is ever retired.
		return retired
	case in.ClaimedBy[r.ID] != "" && sameTarget:
		return claimed
	case in.ClaimedBy[r.ID] != "" && in.Caps.Singleton:
		return conflicting // the account's one registration, another subscription's
	case in.ClaimedBy[r.ID] != "":
		return foreign
	case sameTarget && ours:
		return candidate
	case ours && (movedOutOfBand(in, r) || in.Caps.Singleton):
		// The recorded registration serves another URL although the spec did not change its
		// URL: someone edited it at the provider. It is repaired in place (or replaced, where
		// the URL cannot change in place), not deleted as stale: its id and delivery history
		// stay. The one registration of a singleton account is never stale: it cannot be
		// deleted, and it is the only one there is to serve a new URL.
		return candidate
	case sameTarget && in.Caps.Markers && adoptable(in, r):
		return candidate
	case sameTarget && in.Caps.Markers:
		return conflicting
	case sameTarget && (matching.SameEvents(r.Events, in.Desired.Events) || in.Caps.ReadOnly&providers.FieldEvents != 0):
		// Events the API cannot set tell nothing of who set the URL: adoption decides.
		return unproven
	case sameTarget:
		return lookalike
	case ours:
		return stale
	case in.Caps.Singleton:
		// The account's one registration, serving another URL, not proven ours: set by hand or
		// by another cluster. Creating would repoint it; adopting it would too.
		return conflicting
	}
	if k.LooseOK && k.Loose == desiredLoose {
		return nearTwin
	}
	return foreign
}

// movedOutOfBand reports whether r is the recorded registration, last found serving the URL
// the spec still names, and now serves another: the provider's copy moved, not the spec.
func movedOutOfBand(in PlanInput, r providers.Registration) bool {
	return in.RecordedID != "" && r.ID == in.RecordedID && in.RecordedURL != "" && in.RecordedURL == in.Desired.URL
}

// Marked reports whether r carries this subscription's ownership marker.
func Marked(r providers.Registration, me providers.Owner) bool {
	return r.Owner.UID != "" && r.Owner.UID == me.UID && r.Owner.Cluster == me.Cluster
}

// adoptable reports whether an unmarked registration (or one of an earlier incarnation of this
// very subscription in this cluster), on a provider that stores markers, may be taken over.
func adoptable(in PlanInput, r providers.Registration) bool {
	if in.Adoption == hookv1.AdoptionNever {
		return false
	}
	return r.Owner.IsZero() || sameName(r.Owner, in.Desired.Owner)
}

// sameName reports whether two owners name the same subscription in the same cluster (possibly
// different incarnations, with different UIDs).
func sameName(a, b providers.Owner) bool {
	return a.Cluster == b.Cluster && a.Namespace == b.Namespace && a.Name == b.Name
}

func claimedMessage(in PlanInput, rs []providers.Registration) string {
	r := rs[0]
	return fmt.Sprintf("registration %s already serves %s and belongs to subscription %s of this cluster (it claimed it first): two subscriptions never own one registration, so it is left alone and no second registration is made; delete one of the two subscriptions, or point this one at another URL", r.ID, in.Desired.URL, in.ClaimedBy[r.ID])
}

func unfitMessage(r providers.Registration) string {
	return fmt.Sprintf("registration %s is this subscription's, but the provider's object does not fit what its client reads (%s): it cannot be compared with the spec, so nothing is changed until it is repaired at the provider", r.ID, r.Unfit)
}

func conflictMessage(in PlanInput, r providers.Registration) string {
	if in.Caps.Singleton {
		return singletonConflictMessage(in, r)
	}
	if r.Owner.IsZero() {
		return fmt.Sprintf("registration %s already serves %s and carries no ownership marker; policies.adoption is Never, so it is left alone and no second registration is made", r.ID, in.Desired.URL)
	}
	if sameName(r.Owner, in.Desired.Owner) {
		return fmt.Sprintf("registration %s already serves %s and carries the marker of an earlier subscription with this name (uid %s); policies.adoption is Never, so it is left alone and no second registration is made", r.ID, in.Desired.URL, r.Owner.UID)
	}
	return fmt.Sprintf("registration %s already serves %s and belongs to %s/%s in cluster %q", r.ID, in.Desired.URL, r.Owner.Namespace, r.Owner.Name, r.Owner.Cluster)
}

// singletonConflictMessage explains why the one registration of a singleton account (a GitHub
// App's webhook), serving another URL, is left alone.
func singletonConflictMessage(in PlanInput, r providers.Registration) string {
	if by := in.ClaimedBy[r.ID]; by != "" {
		return fmt.Sprintf("the account has one registration (%s), which delivers to %s for subscription %s of this cluster: two subscriptions cannot share it, so it is left alone; delete one of the two subscriptions", r.ID, r.URL, by)
	}
	return fmt.Sprintf("the account has one registration (%s), part of the account itself, and it delivers to %s: it was set by hand or by another cluster (it carries no ownership marker, and neither this subscription's status nor its signing Secret proves it ours); pointing it at %s would take those deliveries away, so it is left alone whatever policies.adoption says: point it at %s in the provider's settings to have it adopted (policies.adoption Adopt)", r.ID, r.URL, in.Desired.URL, in.Desired.URL)
}

// unprovenMessage explains why unproven registrations serving the spec are neither adopted nor
// duplicated.
func unprovenMessage(in PlanInput, rs []providers.Registration) string {
	if len(rs) == 1 && in.Caps.Singleton {
		return fmt.Sprintf("the account's one registration (%s) already delivers to %s, set by hand or by another cluster: it carries no ownership marker, so it cannot be proven ours; policies.adoption is Never, so it is left alone (its secret is not replaced)", rs[0].ID, in.Desired.URL)
	}
	if len(rs) == 1 {
		return fmt.Sprintf("registration %s already serves %s with these events, and this provider stores no ownership marker, so it cannot be proven ours; policies.adoption is Never, so it is left alone and no second registration is made", RegistrationIDs(rs), in.Desired.URL)
	}
	return fmt.Sprintf("%d registrations serve %s with these events and none can be proven ours (this provider stores no ownership marker): adopting one would be a guess, so all are left alone and none is added; delete all but one at the provider to have it adopted: %s", len(rs), in.Desired.URL, RegistrationIDs(rs))
}

// RegistrationIDs lists registrations as "id (url)", for messages.
func RegistrationIDs(rs []providers.Registration) string {
	ids := make([]string, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.ID+" ("+r.URL+")")
	}
	return strings.Join(ids, ", ")
}
