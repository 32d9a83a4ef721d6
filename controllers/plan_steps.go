package controllers

import (
	"fmt"
	"strings"

	"github.com/hookwarden/hookwarden/providers"
)

// stepKind is what one step of a plan does. Plans list steps in this order.
type stepKind int

const (
	// stepCreate registers a webhook for the spec: nothing on the account serves it. The new
	// registration's secret is stored (or chosen and stored first) and becomes the current one.
	stepCreate stepKind = iota
	// stepReplay repeats keep's original create (same key, same parameters) to get its secret
	// back from the provider's idempotency layer. Should the provider create a new registration
	// instead (its window passed), that one is kept from the next round on.
	stepReplay
	// stepFetchSecret reads keep's secret back from the provider (readable or fetched secrets).
	stepFetchSecret
	// stepSetSecret sets a client-chosen secret on keep in place (the pending one, or a new one
	// stored as pending first), with an update that carries the whole spec.
	stepSetSecret
	// stepReplace creates a registration to replace keep, make-before-break: keep's secret is
	// lost and cannot be recovered, or a field drifted that the provider cannot change in place
	// (Drift names them). The new registration's secret is stored; keep is pruned in the next
	// round, once the new one is current. It ends the round.
	stepReplace
	// stepUpdate changes keep in place (Drift names what).
	stepUpdate
	// stepMarkCurrent makes keep's secret the one the signing Secret names current.
	stepMarkCurrent
	// stepForget drops a vanished registration's secret from the signing Secret: it signs
	// nothing any more, so the receiver stops accepting it.
	stepForget
	// stepPrune deletes a twin, a stale or a replaced registration, and forgets its secret.
	stepPrune
)

func (k stepKind) String() string {
	switch k {
	case stepCreate:
		return "create"
	case stepReplay:
		return "replay-create"
	case stepFetchSecret:
		return "fetch-secret"
	case stepSetSecret:
		return "set-secret"
	case stepReplace:
		return "replace"
	case stepUpdate:
		return "update"
	case stepMarkCurrent:
		return "mark-current"
	case stepForget:
		return "forget-secret"
	case stepPrune:
		return "prune"
	}
	return fmt.Sprintf("step(%d)", int(k))
}

// newSecret is how the secret of a registration a step creates is obtained.
type newSecret int

const (
	// secretReturned: the provider returns it with the create (or reads it for us).
	secretReturned newSecret = iota
	// secretChosen: we choose it, and store it as pending before the provider hears of it.
	secretChosen
	// secretNone: deliveries are not signed.
	secretNone
)

// pruneReason says why a registration is deleted.
type pruneReason string

const (
	pruneTwin    pruneReason = "twin"
	pruneStale   pruneReason = "stale"
	pruneRotated pruneReason = "rotated"
)

// step is one thing a plan does. Which fields are set depends on Kind.
type step struct {
	Kind stepKind
	// Registration is the one acted on: keep (replay, fetch, set, replace, update, mark) or
	// the one deleted (prune).
	Registration providers.Registration
	// Desired is what create, replay, set-secret, replace and update send (its Secret is
	// filled in by the executor: plans never hold secrets).
	Desired providers.Desired
	// Key is the idempotency key of create, replay and replace.
	Key string
	// Secret is how create and replace obtain the new registration's secret.
	Secret newSecret
	// Ping: ask the provider for a test delivery to the registration created.
	Ping bool
	// Drift: what update changes; for replace, the fields that cannot change in place (none:
	// keep's secret is lost).
	Drift []string
	// Why a registration is pruned.
	Why pruneReason
	// ID is the vanished registration whose secret forget drops.
	ID string
	// Rotation: the step (set-secret or replace) rotates a secret that is held, because a
	// rotation was requested.
	Rotation bool
}

func pruneStep(r providers.Registration, why pruneReason) step {
	return step{Kind: stepPrune, Registration: r, Why: why}
}

// endsRound reports whether the step changes which registration is kept, so the plan after it
// is made afresh. (A replay ends the round only when the provider's answer shows a new
// registration, or refuses the replay.)
func (s step) endsRound() bool { return s.Kind == stepReplace }

// String says what the step does, for logs and the command line (never a secret).
func (s step) String() string {
	id := s.Registration.ID
	switch s.Kind {
	case stepCreate:
		return "create a registration for " + s.Desired.URL
	case stepReplay:
		return "recover the signing secret of " + id + " by replaying its create"
	case stepFetchSecret:
		return "read the signing secret of " + id + " back from the provider"
	case stepSetSecret:
		if s.Rotation {
			return "rotate the signing secret of " + id + " in place (requested; the old one is accepted until the provider has the new one)"
		}
		return "set a new signing secret on " + id + " in place"
	case stepReplace:
		if s.Rotation {
			return "rotate the signing secret of " + id + " by a new registration (requested; make-before-break: " + id + " goes once the new one is current)"
		}
		if len(s.Drift) > 0 {
			return fmt.Sprintf("replace %s (the provider cannot change %s in place)", id, strings.Join(s.Drift, ", "))
		}
		return "replace " + id + " (its signing secret is lost and cannot be recovered)"
	case stepUpdate:
		return fmt.Sprintf("update %s in place: %s", id, strings.Join(s.Drift, ", "))
	case stepMarkCurrent:
		return "make the signing secret of " + id + " the current one"
	case stepForget:
		return "forget the signing secret of vanished registration " + s.ID
	case stepPrune:
		return fmt.Sprintf("delete %s registration %s (%s)", s.Why, id, s.Registration.URL)
	}
	return s.Kind.String()
}
