package controllers

import (
	"fmt"
	"sort"
	"strings"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// planInput is everything the plan depends on; the plan is a pure function of it.
type planInput struct {
	// Desired has its URL in canonical form and Owner set to this subscription.
	Desired providers.Desired
	// Observed is every registration on the account.
	Observed []providers.Registration
	// Caps is what the provider can promise: how ownership is proven, who holds the secret,
	// which fields can drift.
	Caps providers.Capabilities
	// RecordedID is status.endpointID.
	RecordedID string
	// HeldSecrets are the registration ids whose signing secret the Secret holds.
	HeldSecrets map[string]bool
	// PendingSecret: the Secret holds a client-chosen secret the provider has not confirmed
	// (a create or a secret change that may or may not have reached the provider).
	PendingSecret bool
	// ReceiverURL is the canonical bundled-receiver URL of this subscription ("" without a
	// receiver base URL): on providers without markers, a registration for it is ours.
	ReceiverURL string
	Adoption    hookv1.AdoptionPolicy
	Twins       hookv1.TwinsPolicy
	// Keys are the account's parsed URLs (nil: parse each); they change no decision.
	Keys *urlKeys
}

// pruneReason says why a registration is deleted.
type pruneReason string

const (
	pruneTwin  pruneReason = "twin"
	pruneStale pruneReason = "stale"
)

type pruneAction struct {
	Registration providers.Registration
	Why          pruneReason
}

// plan is what reconcile does next. Exactly one of Create or Keep is set unless Conflict is.
type plan struct {
	// Keep is the registration that serves the spec.
	Keep *providers.Registration
	// Create asks for a new registration: nothing on the account serves the spec.
	Create bool
	// Drift lists what Update must change on Keep (empty: up to date).
	Drift []string
	// RecoverSecret: the secret of Keep is not held (or a client-chosen one is pending): get it
	// back by replaying the create, rotating, or setting a new secret on Keep, as the provider
	// allows.
	RecoverSecret bool
	// Prune are registrations to delete once Keep's secret is stored.
	Prune []pruneAction
	// KeptTwins are twins left in place because policies.twins is Keep.
	KeptTwins []providers.Registration
	// NearTwins are foreign registrations that differ from the spec only by a trailing slash or
	// the scheme: reported, never touched.
	NearTwins []providers.Registration
	// Unproven are registrations for the desired URL that cannot be proven ours on a provider
	// without markers and are not adopted: reported, never changed or pruned.
	Unproven []providers.Registration
	// Conflict explains why neither creating nor adopting is safe.
	Conflict string
	// Vanished is the recorded registration when the provider no longer lists it but the
	// signing Secret still holds its secret: that secret signs nothing any more, so it is
	// forgotten (and no longer accepted) once the registration kept or created is current.
	Vanished string
}

// relation classifies one observed registration against the desired one.
type relation int

const (
	foreign     relation = iota // not ours: never changed or deleted
	candidate                   // serves the desired target and is ours or adoptable
	stale                       // ours, for a URL the spec no longer names
	nearTwin                    // foreign, same loose key: reported
	conflicting                 // same target but provably someone else's (or adoption refused)
	unproven                    // no markers: same URL and events, not provably ours
	lookalike                   // no markers: same URL, other events, not provably ours
)

// ownership is the evidence that decides whether a registration is this subscription's.
type ownership struct {
	me         providers.Owner
	markers    bool
	recordedID string
	held       map[string]bool
	// receiverURL is the canonical bundled-receiver URL that encodes this subscription.
	receiverURL string
	keys        *urlKeys
}

func (in planInput) ownership() ownership {
	return ownership{me: in.Desired.Owner, markers: in.Caps.Markers, recordedID: in.RecordedID, held: in.HeldSecrets, receiverURL: in.ReceiverURL, keys: in.Keys}
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
func (o ownership) owns(r providers.Registration) bool {
	recorded := o.recordedID != "" && r.ID == o.recordedID
	if o.markers {
		if r.Owner.IsZero() {
			return recorded
		}
		return marked(r, o.me) || (recorded && sameName(r.Owner, o.me))
	}
	if recorded || o.held[r.ID] {
		return true
	}
	if o.receiverURL == "" {
		return false
	}
	k := o.keys.get(r.URL)
	return k.canonicalOK && k.canonical == o.receiverURL
}

func classify(in planInput, own ownership, r providers.Registration, desiredLoose string) relation {
	ours := own.owns(r)
	k := in.Keys.get(r.URL)
	sameTarget := k.canonicalOK && k.canonical == in.Desired.URL
	switch {
	case sameTarget && ours:
		return candidate
	case sameTarget && in.Caps.Markers && adoptable(in, r):
		return candidate
	case sameTarget && in.Caps.Markers:
		return conflicting
	case sameTarget && matching.SameEvents(r.Events, in.Desired.Events):
		return unproven
	case sameTarget:
		return lookalike
	case ours:
		return stale
	}
	if k.looseOK && k.loose == desiredLoose {
		return nearTwin
	}
	return foreign
}

// marked reports whether r carries this subscription's ownership marker.
func marked(r providers.Registration, me providers.Owner) bool {
	return r.Owner.UID != "" && r.Owner.UID == me.UID && r.Owner.Cluster == me.Cluster
}

// adoptable reports whether an unmarked registration (or one of an earlier incarnation of this
// very subscription in this cluster), on a provider that stores markers, may be taken over.
func adoptable(in planInput, r providers.Registration) bool {
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

func computePlan(in planInput) plan {
	var p plan
	desiredLoose, _ := matching.LooseKey(in.Desired.URL)
	own := in.ownership()
	var candidates, adoptables []providers.Registration
	for _, r := range in.Observed {
		switch classify(in, own, r, desiredLoose) {
		case candidate:
			candidates = append(candidates, r)
		case stale:
			p.Prune = append(p.Prune, pruneAction{Registration: r, Why: pruneStale})
		case nearTwin:
			p.NearTwins = append(p.NearTwins, r)
		case conflicting:
			p.Conflict = conflictMessage(in, r)
		case unproven:
			adoptables = append(adoptables, r)
		case lookalike:
			p.Unproven = append(p.Unproven, r)
		}
	}
	if len(candidates) == 0 && len(adoptables) > 0 {
		// Without markers an unproven registration is adopted only when it is the one
		// registration serving the spec and the policy allows it; otherwise taking one would
		// be a guess, and creating another would duplicate it.
		if len(adoptables) == 1 && in.Adoption != hookv1.AdoptionNever {
			candidates, adoptables = adoptables, nil
		} else {
			p.Conflict = unprovenMessage(in, adoptables)
		}
	}
	p.Unproven = append(p.Unproven, adoptables...)
	if p.Conflict != "" && len(candidates) == 0 {
		// Neither create (a second hook for the same URL) nor adopt: wait for a human.
		p.Prune = nil
		return p
	}
	p.Conflict = ""
	p.Vanished = vanished(in)
	if len(candidates) == 0 {
		p.Create = true
		return p
	}
	keep := pickKeeper(in, candidates)
	p.Keep = &keep
	p.RecoverSecret = needsSecret(in, keep)
	p.Drift = drift(in.Desired, keep, in.Caps)
	for _, c := range candidates {
		if c.ID == keep.ID {
			continue
		}
		if in.Twins == hookv1.TwinsKeep {
			p.KeptTwins = append(p.KeptTwins, c)
		} else {
			p.Prune = append(p.Prune, pruneAction{Registration: c, Why: pruneTwin})
		}
	}
	sort.SliceStable(p.Prune, func(i, j int) bool { return p.Prune[i].Registration.ID < p.Prune[j].Registration.ID })
	return p
}

// vanished returns the recorded registration's id when the account no longer has it and its
// secret is held ("" otherwise).
func vanished(in planInput) string {
	if in.RecordedID == "" || !in.HeldSecrets[in.RecordedID] {
		return ""
	}
	for _, r := range in.Observed {
		if r.ID == in.RecordedID {
			return ""
		}
	}
	return in.RecordedID
}

// needsSecret reports whether keep's signing secret must be obtained before anything else: it
// is not held, or (client-chosen) a pending secret may already be the one keep verifies with,
// so the change it was written for is finished first.
func needsSecret(in planInput, keep providers.Registration) bool {
	switch in.Caps.Secret {
	case providers.SecretNone:
		return false
	case providers.SecretClientChosen:
		return !in.HeldSecrets[keep.ID] || in.PendingSecret
	}
	return !in.HeldSecrets[keep.ID]
}

// pickKeeper prefers, in order: the recorded registration whose secret we hold, any whose secret
// we hold, the recorded one, one carrying our marker, then the oldest. Keeping the one whose
// secret we hold avoids a rotation.
func pickKeeper(in planInput, cs []providers.Registration) providers.Registration {
	score := func(r providers.Registration) int {
		s := 0
		if in.HeldSecrets[r.ID] {
			s += 8
		}
		if r.ID == in.RecordedID {
			s += 4
		}
		if marked(r, in.Desired.Owner) {
			s += 2
		}
		return s
	}
	best := cs[0]
	for _, c := range cs[1:] {
		sc, sb := score(c), score(best)
		if sc > sb || (sc == sb && (c.Created.Before(best.Created) || (c.Created.Equal(best.Created) && c.ID < best.ID))) {
			best = c
		}
	}
	return best
}

// drift lists the fields of r that differ from d, among those the provider has: a field it
// does not have (a GitHub hook's description or marker) is never "changed", which would be
// perpetual drift. The URL compares as a string: a registration that is only canonically equal
// is rewritten to the canonical spelling. Provider-specific settings the provider reports as
// off (Misconfigured) are drift too.
func drift(d providers.Desired, r providers.Registration, caps providers.Capabilities) []string {
	var out []string
	if r.URL != d.URL {
		out = append(out, "url")
	}
	if !matching.SameEvents(r.Events, d.Events) {
		out = append(out, "events")
	}
	if caps.Has(providers.FieldDescription) && r.Description != d.Description {
		out = append(out, "description")
	}
	if caps.Has(providers.FieldDisabled) && r.Disabled != d.Disabled {
		out = append(out, "disabled")
	}
	if caps.Has(providers.FieldMarker) && r.Owner != d.Owner {
		out = append(out, "ownership marker")
	}
	return append(out, r.Misconfigured...)
}

func conflictMessage(in planInput, r providers.Registration) string {
	if r.Owner.IsZero() {
		return fmt.Sprintf("registration %s already serves %s and carries no ownership marker; policies.adoption is Never, so it is left alone and no second registration is made", r.ID, in.Desired.URL)
	}
	if sameName(r.Owner, in.Desired.Owner) {
		return fmt.Sprintf("registration %s already serves %s and carries the marker of an earlier subscription with this name (uid %s); policies.adoption is Never, so it is left alone and no second registration is made", r.ID, in.Desired.URL, r.Owner.UID)
	}
	return fmt.Sprintf("registration %s already serves %s and belongs to %s/%s in cluster %q", r.ID, in.Desired.URL, r.Owner.Namespace, r.Owner.Name, r.Owner.Cluster)
}

// unprovenMessage explains why unproven registrations serving the spec are neither adopted nor
// duplicated.
func unprovenMessage(in planInput, rs []providers.Registration) string {
	if len(rs) == 1 {
		return fmt.Sprintf("registration %s already serves %s with these events, and this provider stores no ownership marker, so it cannot be proven ours; policies.adoption is Never, so it is left alone and no second registration is made", registrationIDs(rs), in.Desired.URL)
	}
	return fmt.Sprintf("%d registrations serve %s with these events and none can be proven ours (this provider stores no ownership marker): adopting one would be a guess, so all are left alone and none is added; delete all but one at the provider to have it adopted: %s", len(rs), in.Desired.URL, registrationIDs(rs))
}

func registrationIDs(rs []providers.Registration) string {
	ids := make([]string, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.ID+" ("+r.URL+")")
	}
	return strings.Join(ids, ", ")
}
