package decide

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/providers"
)

// Preview is the plan a reconcile of a subscription would start with, made as the reconciler
// makes it (a fresh provider list, the signing Secret, ComputePlan) with nothing written to the
// provider or the cluster: what `hookwarden plan` prints. Its steps are the first round's: a
// step that ends the round (a replacement) is followed by a plan made afresh, which prunes the
// registration replaced; Later holds those rounds (PreviewRounds).
type Preview struct {
	Provider string `json:"provider"`
	// URL is the canonical URL the spec asks for.
	URL string `json:"url"`
	// Decision: keep, create, conflict or stall.
	Decision string `json:"decision"`
	// Keep is the registration that serves the spec (decision keep).
	Keep *PreviewRegistration `json:"keep,omitempty"`
	// Adopt: Keep is not yet this subscription's (not recorded, no marker of it, its secret not
	// held): keeping it adopts it.
	Adopt bool          `json:"adopt,omitempty"`
	Steps []PreviewStep `json:"steps,omitempty"`
	// Conflict or Stall say why nothing is done (decision conflict or stall).
	Conflict string `json:"conflict,omitempty"`
	Stall    string `json:"stall,omitempty"`
	// Reported registrations, never changed: twins kept by policies.twins Keep, foreign ones
	// that differ by a trailing slash or scheme, unproven ones on providers without markers,
	// foreign ones whose object does not fit the provider's shape.
	KeptTwins []PreviewRegistration `json:"keptTwins,omitempty"`
	NearTwins []PreviewRegistration `json:"nearTwins,omitempty"`
	Unproven  []PreviewRegistration `json:"unproven,omitempty"`
	Unfit     []PreviewRegistration `json:"unfit,omitempty"`
	// ReadOnlyDrift says how the kept registration's fields that the provider's API cannot
	// change (a GitHub App's events) differ from the spec: reported, never a step.
	ReadOnlyDrift string `json:"readOnlyDrift,omitempty"`
	// Observed is how many registrations the account's list held.
	Observed int `json:"observed"`
	// Later are the rounds after the first, as the manager would plan them once the first
	// round's replacement exists (PlanRounds).
	Later []PreviewRound `json:"later,omitempty"`
}

// PreviewRound is a round after the first.
type PreviewRound struct {
	// Decision: keep, create, conflict or stall.
	Decision string        `json:"decision"`
	Steps    []PreviewStep `json:"steps,omitempty"`
}

// Changes reports whether the plan writes anything at the provider or to the signing Secret.
func (p Preview) Changes() bool { return len(p.Steps) > 0 }

// PreviewRegistration is a registration as the plan saw it (never its secret).
type PreviewRegistration struct {
	ID     string   `json:"id"`
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
	// Owner is the ownership marker it carries ("" for none).
	Owner string `json:"owner,omitempty"`
}

// PreviewStep is one step of the plan.
type PreviewStep struct {
	// Action is the step's kind: create, replay-create, fetch-secret, set-secret, replace,
	// update, mark-current, forget-secret, prune.
	Action string `json:"action"`
	// Registration is the id acted on ("" for create).
	Registration string `json:"registration,omitempty"`
	// Description says what the step does, in the words of the manager's logs.
	Description string `json:"description"`
	// Changes are the fields an update changes (or a replacement could not change in place).
	Changes []FieldChange `json:"changes,omitempty"`
	// Why a registration is pruned: twin, stale or rotated.
	Why string `json:"why,omitempty"`
	// Secret is how the step gets a signing secret: returned, chosen, replay, fetch, rotation.
	Secret string `json:"secret,omitempty"`
}

// FieldChange is one field of a registration that differs from the spec.
type FieldChange struct {
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// PreviewRounds renders every round PlanRounds foresees from in: the first as the Preview, the
// rest as its Later rounds.
func PreviewRounds(in PlanInput) Preview {
	ins, plans := PlanRounds(in)
	out := NewPreview(ins[0], plans[0])
	for i := 1; i < len(plans); i++ {
		later := NewPreview(ins[i], plans[i])
		out.Later = append(out.Later, PreviewRound{Decision: later.Decision, Steps: later.Steps})
	}
	return out
}

// NewPreview renders one round's plan for the command line.
func NewPreview(in PlanInput, p Plan) Preview {
	out := Preview{URL: in.Desired.URL, Decision: p.Decision.String(), Conflict: p.Conflict, Stall: p.Stall, Observed: len(in.Observed)}
	if p.Keep != nil {
		k := previewRegistration(*p.Keep)
		out.Keep = &k
		out.Adopt = p.Adopts(in)
		out.ReadOnlyDrift = ReadOnlyDrift(in, *p.Keep)
	}
	for _, s := range p.Steps {
		ps := PreviewStep{Action: s.Kind.String(), Registration: s.Registration.ID, Description: s.String(), Why: string(s.Why)}
		switch s.Kind {
		case StepCreate, StepReplace:
			ps.Secret = map[SecretSource]string{SecretReturned: "returned", SecretChosen: "chosen", SecretNone: ""}[s.Secret]
			if s.Kind == StepReplace && len(s.Drift) == 0 {
				ps.Secret = "rotation"
			}
			if s.Rotation {
				ps.Secret = "requested rotation"
			}
			for _, f := range s.Drift {
				ps.Changes = append(ps.Changes, fieldChange(f, s.Registration, in.Desired))
			}
		case StepReplay:
			ps.Secret = "replay"
		case StepFetchSecret:
			ps.Secret = "fetch"
		case StepSetSecret:
			ps.Secret = "chosen"
			if s.Rotation {
				ps.Secret = "requested rotation"
			}
			for _, f := range Drift(in, s.Registration) {
				ps.Changes = append(ps.Changes, fieldChange(f, s.Registration, in.Desired))
			}
		case StepUpdate:
			for _, f := range s.Drift {
				ps.Changes = append(ps.Changes, fieldChange(f, s.Registration, in.Desired))
			}
		case StepForget:
			ps.Registration = s.ID
		}
		out.Steps = append(out.Steps, ps)
	}
	for _, set := range []struct {
		from []providers.Registration
		to   *[]PreviewRegistration
	}{{p.KeptTwins, &out.KeptTwins}, {p.NearTwins, &out.NearTwins}, {p.Unproven, &out.Unproven}, {p.Unfit, &out.Unfit}} {
		for _, r := range set.from {
			*set.to = append(*set.to, previewRegistration(r))
		}
	}
	return out
}

func previewRegistration(r providers.Registration) PreviewRegistration {
	return PreviewRegistration{ID: r.ID, URL: r.URL, Events: sortedEvents(r.Events), Owner: ownerString(r.Owner)}
}

// fieldChange is what a drifted field is and would become.
func fieldChange(field string, r providers.Registration, d providers.Desired) FieldChange {
	switch field {
	case DriftURL:
		return FieldChange{Field: field, From: r.URL, To: d.URL}
	case DriftEvents:
		return FieldChange{Field: field, From: strings.Join(sortedEvents(r.Events), ","), To: strings.Join(sortedEvents(d.Events), ",")}
	case DriftDescription:
		return FieldChange{Field: field, From: strconv.Quote(r.Description), To: strconv.Quote(d.Description)}
	case DriftDisabled:
		return FieldChange{Field: field, From: strconv.FormatBool(r.Disabled), To: strconv.FormatBool(d.Disabled)}
	case DriftMarker:
		return FieldChange{Field: field, From: ownerString(r.Owner), To: ownerString(d.Owner)}
	}
	// A provider-specific setting the provider reports as off.
	if v, ok := r.Reconfigures[field]; ok {
		return FieldChange{Field: field, From: v.From, To: v.To}
	}
	return FieldChange{Field: field, From: "misconfigured", To: "as the provider's client sets it"}
}

func sortedEvents(events []string) []string {
	out := slices.Clone(events)
	slices.Sort(out)
	return slices.Compact(out)
}

// ownerString renders an ownership marker ("" for none; the UID of a subscription not yet
// created is shown as "<new>").
func ownerString(o providers.Owner) string {
	if o.IsZero() {
		return ""
	}
	uid := o.UID
	if uid == "" {
		uid = "<new>"
	}
	return fmt.Sprintf("%s/%s/%s (uid %s)", o.Cluster, o.Namespace, o.Name, uid)
}

// RetryAfter reports how long the manager would wait before trying again after err (a
// provider rate limit): the command line waits as long and says so.
func RetryAfter(err error) (time.Duration, bool) {
	var w *WaitError
	if errors.As(err, &w) {
		return w.After, true
	}
	return 0, false
}
