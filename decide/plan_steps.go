package decide

import (
	"fmt"
	"strings"

	"github.com/hookwarden/hookwarden/providers"
)

// StepKind is what one step of a plan does. Plans list steps in this order.
type StepKind int

const (
	// StepCreate registers a webhook for the spec: nothing on the account serves it. The new
	// registration's secret is stored (or chosen and stored first) and becomes the current one.
	StepCreate StepKind = iota
	// StepReplay repeats keep's original create (same key, same parameters) to get its secret
	// back from the provider's idempotency layer. Should the provider create a new registration
	// instead (its window passed), that one is kept from the next round on.
	StepReplay
	// StepFetchSecret reads keep's secret back from the provider (readable or fetched secrets).
	StepFetchSecret
	// StepSetSecret sets a client-chosen secret on keep in place (the pending one, or a new one
	// stored as pending first), with an update that carries the whole spec.
	StepSetSecret
	// StepReplace creates a registration to replace keep, make-before-break: keep's secret is
	// lost and cannot be recovered, or a field drifted that the provider cannot change in place
	// (Drift names them). The new registration's secret is stored; keep is pruned in the next
	// round, once the new one is current. It ends the round.
	StepReplace
	// StepUpdate changes keep in place (Drift names what).
	StepUpdate
	// StepMarkCurrent makes keep's secret the one the signing Secret names current.
	StepMarkCurrent
	// StepForget drops a vanished registration's secret from the signing Secret: it signs
	// nothing any more, so the receiver stops accepting it.
	StepForget
	// StepPrune deletes a twin, a stale or a replaced registration, and forgets its secret.
	StepPrune
)

// String names the step kind as `hookwarden plan` prints it.
func (k StepKind) String() string {
	switch k {
	case StepCreate:
		return "create"
	case StepReplay:
		return "replay-create"
	case StepFetchSecret:
		return "fetch-secret"
	case StepSetSecret:
		return "set-secret"
	case StepReplace:
		return "replace"
	case StepUpdate:
		return "update"
	case StepMarkCurrent:
		return "mark-current"
	case StepForget:
		return "forget-secret"
	case StepPrune:
		return "prune"
	}
	return fmt.Sprintf("step(%d)", int(k))
}

// SecretSource is how the secret of a registration a step creates is obtained.
type SecretSource int

const (
	// SecretReturned: the provider returns it with the create (or reads it for us).
	SecretReturned SecretSource = iota
	// SecretChosen: we choose it, and store it as pending before the provider hears of it.
	SecretChosen
	// SecretNone: deliveries are not signed.
	SecretNone
)

// PruneReason says why a registration is deleted.
type PruneReason string

const (
	PruneTwin    PruneReason = "twin"
	PruneStale   PruneReason = "stale"
	PruneRotated PruneReason = "rotated"
)

// Step is one thing a plan does. Which fields are set depends on Kind.
type Step struct {
	Kind StepKind
	// Registration is the one acted on: keep (replay, fetch, set, replace, update, mark) or
	// the one deleted (prune).
	Registration providers.Registration
	// Desired is what create, replay, set-secret, replace and update send (its Secret is
	// filled in by the executor: plans never hold secrets).
	Desired providers.Desired
	// Key is the idempotency key of create, replay and replace.
	Key string
	// Secret is how create and replace obtain the new registration's secret.
	Secret SecretSource
	// Ping: ask the provider for a test delivery to the registration created.
	Ping bool
	// Drift: what update changes; for replace, the fields that cannot change in place (none:
	// keep's secret is lost).
	Drift []string
	// Why a registration is pruned.
	Why PruneReason
	// ID is the vanished registration whose secret forget drops.
	ID string
	// Rotation: the step (set-secret or replace) rotates a secret that is held, because a
	// rotation was requested.
	Rotation bool
}

// PruneStep deletes r, for why.
func PruneStep(r providers.Registration, why PruneReason) Step {
	return Step{Kind: StepPrune, Registration: r, Why: why}
}

// endsRound reports whether the step changes which registration is kept, so the plan after it
// is made afresh. (A replay ends the round only when the provider's answer shows a new
// registration, or refuses the replay.)
func (s Step) EndsRound() bool { return s.Kind == StepReplace }

// String says what the step does, for logs and the command line (never a secret).
func (s Step) String() string {
	id := s.Registration.ID
	switch s.Kind {
	case StepCreate:
		return "create a registration for " + s.Desired.URL
	case StepReplay:
		return "recover the signing secret of " + id + " by replaying its create"
	case StepFetchSecret:
		return "read the signing secret of " + id + " back from the provider"
	case StepSetSecret:
		if s.Rotation {
			return "rotate the signing secret of " + id + " in place (requested; the old one is accepted until the provider has the new one)"
		}
		return "set a new signing secret on " + id + " in place"
	case StepReplace:
		if s.Rotation {
			return "rotate the signing secret of " + id + " by a new registration (requested; make-before-break: " + id + " goes once the new one is current)"
		}
		if len(s.Drift) > 0 {
			return fmt.Sprintf("replace %s (the provider cannot change %s in place)", id, strings.Join(s.Drift, ", "))
		}
		return "replace " + id + " (its signing secret is lost and cannot be recovered)"
	case StepUpdate:
		return fmt.Sprintf("update %s in place: %s", id, strings.Join(s.Drift, ", "))
	case StepMarkCurrent:
		return "make the signing secret of " + id + " the current one"
	case StepForget:
		return "forget the signing secret of vanished registration " + s.ID
	case StepPrune:
		return fmt.Sprintf("delete %s registration %s (%s)", s.Why, id, s.Registration.URL)
	}
	return s.Kind.String()
}
