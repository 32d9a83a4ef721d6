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
	// RecordedID is status.endpointID.
	RecordedID string
	// HeldSecrets are the registration ids whose signing secret the Secret holds.
	HeldSecrets map[string]bool
	Adoption    hookv1.AdoptionPolicy
	Twins       hookv1.TwinsPolicy
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
	// RecoverSecret: the secret of Keep is not held; replay its create or rotate.
	RecoverSecret bool
	// Prune are registrations to delete once Keep's secret is stored.
	Prune []pruneAction
	// KeptTwins are twins left in place because policies.twins is Keep.
	KeptTwins []providers.Registration
	// NearTwins are foreign registrations that differ from the spec only by a trailing slash or
	// the scheme: reported, never touched.
	NearTwins []providers.Registration
	// Conflict explains why neither creating nor adopting is safe.
	Conflict string
}

// relation classifies one observed registration against the desired one.
type relation int

const (
	foreign     relation = iota // not ours: never changed or deleted
	candidate                   // serves the desired target and is ours or adoptable
	stale                       // ours, for a URL the spec no longer names
	nearTwin                    // foreign, same loose key: reported
	conflicting                 // same target but provably someone else's (or adoption refused)
)

func classify(in planInput, r providers.Registration, desiredLoose string) relation {
	ours := owns(r, in.Desired.Owner, in.RecordedID)
	canonical, err := matching.Canonical(r.URL)
	sameTarget := err == nil && canonical == in.Desired.URL
	switch {
	case sameTarget && ours:
		return candidate
	case sameTarget && adoptable(in, r):
		return candidate
	case sameTarget:
		return conflicting
	case ours:
		return stale
	}
	if loose, err := matching.LooseKey(r.URL); err == nil && loose == desiredLoose {
		return nearTwin
	}
	return foreign
}

// marked reports whether r carries this subscription's ownership marker.
func marked(r providers.Registration, me providers.Owner) bool {
	return r.Owner.UID != "" && r.Owner.UID == me.UID && r.Owner.Cluster == me.Cluster
}

// owns is the proof of ownership that lets reconcile and deletion change or delete r: our
// marker, or the id we recorded. The recorded id is weaker proof than a marker: it never
// overrides another owner's.
func owns(r providers.Registration, me providers.Owner, recordedID string) bool {
	return marked(r, me) || (recordedID != "" && r.ID == recordedID && (r.Owner.IsZero() || sameName(r.Owner, me)))
}

// adoptable reports whether a registration that is not provably ours may be taken over: it must
// carry no marker of another live owner (an earlier incarnation of this very subscription in
// this cluster counts as ours to take), and the adoption policy must allow it.
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
	var candidates []providers.Registration
	for _, r := range in.Observed {
		switch classify(in, r, desiredLoose) {
		case candidate:
			candidates = append(candidates, r)
		case stale:
			p.Prune = append(p.Prune, pruneAction{Registration: r, Why: pruneStale})
		case nearTwin:
			p.NearTwins = append(p.NearTwins, r)
		case conflicting:
			p.Conflict = conflictMessage(in, r)
		}
	}
	if p.Conflict != "" && len(candidates) == 0 {
		// Neither create (a second hook for the same URL) nor adopt: wait for a human.
		p.Prune = nil
		return p
	}
	p.Conflict = ""
	if len(candidates) == 0 {
		p.Create = true
		return p
	}
	keep := pickKeeper(in, candidates)
	p.Keep = &keep
	p.RecoverSecret = !in.HeldSecrets[keep.ID]
	p.Drift = drift(in.Desired, keep)
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

// drift lists the fields of r that differ from d. The URL compares as a string: a registration
// that is only canonically equal is rewritten to the canonical spelling.
func drift(d providers.Desired, r providers.Registration) []string {
	var out []string
	if r.URL != d.URL {
		out = append(out, "url")
	}
	if !matching.SameEvents(r.Events, d.Events) {
		out = append(out, "events")
	}
	if r.Description != d.Description {
		out = append(out, "description")
	}
	if r.Disabled != d.Disabled {
		out = append(out, "disabled")
	}
	if r.Owner != d.Owner {
		out = append(out, "ownership marker")
	}
	return out
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

func registrationIDs(rs []providers.Registration) string {
	ids := make([]string, 0, len(rs))
	for _, r := range rs {
		ids = append(ids, r.ID+" ("+r.URL+")")
	}
	return strings.Join(ids, ", ")
}
