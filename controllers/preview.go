package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// Preview is the plan a reconcile of a subscription would start with, made as the reconciler
// makes it (a fresh provider list, the signing Secret, decide.ComputePlan) with nothing written to the
// provider or the cluster: what `hookwarden plan` prints. It is the first round only: a step
// that ends the round (a replacement) is followed by a plan made afresh, which prunes the
// registration replaced.
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
	// Observed is how many registrations the account's list held.
	Observed int `json:"observed"`
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

// Preview plans sub as a reconcile would, reading the provider's list (read-only, fresh) and
// the signing Secret through APIReader, and writes nothing: no provider write, no Secret, no
// status, no event. Only r.APIReader, r.Accounts, r.ClusterName and r.ReceiverBaseURL are used.
// sub's status (endpointID, url) and UID are what the plan reads as recorded: for a
// subscription not yet in the cluster, leave them empty.
func (r *Reconciler) Preview(ctx context.Context, sub *hookv1.WebhookSubscription) (Preview, error) {
	return r.preview(ctx, sub, nil)
}

// PreviewListed is Preview from a list of the account read before (Observe's): `hookwarden
// import` plans each manifest it writes from the one list it read, to say what adopting changes.
func (r *Reconciler) PreviewListed(ctx context.Context, sub *hookv1.WebhookSubscription, observed []providers.Registration) (Preview, error) {
	if observed == nil {
		observed = []providers.Registration{}
	}
	return r.preview(ctx, sub, observed)
}

// preview is Preview from observed, or from a fresh list when observed is nil.
func (r *Reconciler) preview(ctx context.Context, sub *hookv1.WebhookSubscription, observed []providers.Registration) (Preview, error) {
	if r.credentials == nil {
		r.credentials = &credentials{api: r.APIReader, m: map[credentialKey]credentialEntry{}}
	}
	desiredURL, _, err := decide.ValidateSpec(&sub.Spec, r.Accounts.Registry())
	if err != nil {
		return Preview{}, err
	}
	ownReceiverURL := r.ownReceiverURL(sub)
	if sub.Spec.Endpoint.Receiver != nil {
		if desiredURL, err = decide.ReceiverURL(r.ReceiverBaseURL, sub.Namespace, sub.Name); err != nil {
			return Preview{}, err
		}
	}
	acct, err := r.account(ctx, sub)
	if err != nil {
		return Preview{}, err
	}
	signing, err := r.readSigningState(ctx, sub)
	if err != nil {
		return Preview{}, err
	}
	o, unlock := acct.Lock()
	defer unlock()
	s := &session{r: r, sub: sub, ops: o, caps: o.Capabilities(), signing: signing, rotate: rotateRequest(sub) != "", desired: providers.Desired{
		URL:         desiredURL,
		Events:      sub.Spec.Events,
		Description: sub.Spec.Description,
		Disabled:    sub.Spec.Disabled,
		Owner:       r.owner(sub),
	}}
	if observed == nil {
		if observed, err = o.List(ctx, 0); err != nil {
			return Preview{}, decide.FromList(err)
		}
	}
	in, err := s.claimedInput(ctx, s.planInput(observed, ownReceiverURL, decide.Rounds{}))
	if err != nil {
		return Preview{}, err
	}
	out := previewOf(in, decide.ComputePlan(in))
	out.Provider = string(sub.Spec.Provider.Type)
	return out, nil
}

// previewOf renders a plan for the command line.
func previewOf(in decide.PlanInput, p decide.Plan) Preview {
	out := Preview{URL: in.Desired.URL, Decision: p.Decision.String(), Conflict: p.Conflict, Stall: p.Stall, Observed: len(in.Observed)}
	if p.Keep != nil {
		k := previewRegistration(*p.Keep)
		out.Keep = &k
		own := in.Ownership()
		out.Adopt = p.Keep.ID != in.RecordedID && !decide.Marked(*p.Keep, in.Desired.Owner) && !own.Held[p.Keep.ID]
	}
	for _, s := range p.Steps {
		ps := PreviewStep{Action: s.Kind.String(), Registration: s.Registration.ID, Description: s.String(), Why: string(s.Why)}
		switch s.Kind {
		case decide.StepCreate, decide.StepReplace:
			ps.Secret = map[decide.SecretSource]string{decide.SecretReturned: "returned", decide.SecretChosen: "chosen", decide.SecretNone: ""}[s.Secret]
			if s.Kind == decide.StepReplace && len(s.Drift) == 0 {
				ps.Secret = "rotation"
			}
			if s.Rotation {
				ps.Secret = "requested rotation"
			}
			for _, f := range s.Drift {
				ps.Changes = append(ps.Changes, fieldChange(f, s.Registration, in.Desired))
			}
		case decide.StepReplay:
			ps.Secret = "replay"
		case decide.StepFetchSecret:
			ps.Secret = "fetch"
		case decide.StepSetSecret:
			ps.Secret = "chosen"
			if s.Rotation {
				ps.Secret = "requested rotation"
			}
			for _, f := range decide.Drift(in, s.Registration) {
				ps.Changes = append(ps.Changes, fieldChange(f, s.Registration, in.Desired))
			}
		case decide.StepUpdate:
			for _, f := range s.Drift {
				ps.Changes = append(ps.Changes, fieldChange(f, s.Registration, in.Desired))
			}
		case decide.StepForget:
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
	case decide.DriftURL:
		return FieldChange{Field: field, From: r.URL, To: d.URL}
	case decide.DriftEvents:
		return FieldChange{Field: field, From: strings.Join(sortedEvents(r.Events), ","), To: strings.Join(sortedEvents(d.Events), ",")}
	case decide.DriftDescription:
		return FieldChange{Field: field, From: strconv.Quote(r.Description), To: strconv.Quote(d.Description)}
	case decide.DriftDisabled:
		return FieldChange{Field: field, From: strconv.FormatBool(r.Disabled), To: strconv.FormatBool(d.Disabled)}
	case decide.DriftMarker:
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
	var w *decide.WaitError
	if errors.As(err, &w) {
		return w.After, true
	}
	return 0, false
}

// Observe lists the registrations on the account sub's provider block names (fresh, read-only),
// reached as the reconciler reaches it (credentials from the Secret the block names, the same
// client and pacing), with the provider's capabilities: what `hookwarden import` reads. Only
// sub's namespace, provider block and events are used.
func (r *Reconciler) Observe(ctx context.Context, sub *hookv1.WebhookSubscription) ([]providers.Registration, providers.Capabilities, error) {
	if r.credentials == nil {
		r.credentials = &credentials{api: r.APIReader, m: map[credentialKey]credentialEntry{}}
	}
	acct, err := r.account(ctx, sub)
	if err != nil {
		return nil, providers.Capabilities{}, err
	}
	o, unlock := acct.Lock()
	defer unlock()
	regs, err := o.List(ctx, 0)
	if err != nil {
		return nil, o.Capabilities(), decide.FromList(err)
	}
	return regs, o.Capabilities(), nil
}
