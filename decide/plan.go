package decide

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
)

// PlanInput is everything the plan depends on; the plan is a pure function of it.
type PlanInput struct {
	// Desired has its URL in canonical form and Owner set to this subscription.
	Desired providers.Desired
	// Generation is the subscription's: idempotency keys are per generation.
	Generation int64
	// SpecEdited: the spec changed since the last reconcile recorded (generation ahead of
	// observedGeneration). A registration disabled while the spec wants it enabled is then the
	// user's doing (spec.disabled just set to false), repaired at once; otherwise the provider
	// disabled it (pausedByProvider).
	SpecEdited bool
	// Observed is every registration on the account.
	Observed []providers.Registration
	// Caps is what the provider can promise: how ownership is proven, who holds the secret,
	// which fields can drift, which can only change by a new registration.
	Caps providers.Capabilities
	// CanPing: the provider can be asked for a test delivery (providers.Pinger).
	CanPing bool
	// RecordedID is status.endpointID; RecordedURL is status.url, the URL the recorded
	// registration was last found serving.
	RecordedID  string
	RecordedURL string
	// HeldSecrets are the registration ids whose signing secret the Secret holds; CurrentID is
	// the one it marks current.
	HeldSecrets map[string]bool
	CurrentID   string
	// PendingSecret: the Secret holds a client-chosen secret the provider has not confirmed
	// (a create or a secret change that may or may not have reached the provider).
	PendingSecret bool
	// ReceiverURL is the canonical bundled-receiver URL of this subscription ("" without a
	// receiver base URL): on providers without markers, a registration for it is ours.
	ReceiverURL string
	Adoption    hookv1.AdoptionPolicy
	Twins       hookv1.TwinsPolicy
	// RotateRequested: a rotation of the signing secret was asked for (the annotation
	// hookwarden.io/rotate-requested-at changed) and no earlier round of this reconcile did it.
	RotateRequested bool
	// ClaimedBy are the observed registrations that another subscription of this cluster owns
	// (see claims.go), by id: the subscription's namespace/name.
	ClaimedBy map[string]string
	// Rounds is what earlier rounds of this reconcile learned.
	Rounds Rounds
	// Keys are the account's parsed URLs (nil: parse each); they change no decision.
	Keys *URLKeys
}

// Rounds is what the steps of earlier rounds of one reconcile established, so the plan made
// after a step that changed which registration is kept decides from it.
type Rounds struct {
	// Retired are registrations a replacement was made for: never kept again, always pruned.
	Retired map[string]bool
	// ReplayRefused are registrations whose create the provider would not replay (parameters
	// changed since, or no secret in the answer): their secret is recovered by a replacement.
	ReplayRefused map[string]bool
	// Rotated: a requested rotation ran in an earlier round.
	Rotated bool
}

// Retire records that a replacement was made for id: it is pruned, never kept again.
func (r *Rounds) Retire(id string) {
	if r.Retired == nil {
		r.Retired = map[string]bool{}
	}
	r.Retired[id] = true
}

// RefuseReplay records that the provider would not replay id's create.
func (r *Rounds) RefuseReplay(id string) {
	if r.ReplayRefused == nil {
		r.ReplayRefused = map[string]bool{}
	}
	r.ReplayRefused[id] = true
}

// Decision is what the plan does about the spec: keep a registration, create one, or neither.
type Decision int

const (
	// Keep: a registration on the account serves the spec (plan.Keep).
	Keep Decision = iota
	// Create: nothing serves the spec; the first step creates a registration.
	Create
	// Conflict: neither creating nor adopting is safe (plan.Conflict says why).
	Conflict
	// Stall: a registration of this subscription's does not fit the provider's shape, or
	// the registration serving the spec is another subscription's (plan.Stall says which);
	// nothing is done until that changes.
	Stall
)

// String names the decision as `hookwarden plan` prints it.
func (d Decision) String() string {
	switch d {
	case Keep:
		return "keep"
	case Create:
		return "create"
	case Conflict:
		return "conflict"
	case Stall:
		return "stall"
	}
	return fmt.Sprintf("decision(%d)", int(d))
}

// Plan is everything one round of a reconcile does, in order. The executor carries the steps
// out and never changes them; a step that changes which registration is kept (a replacement, a
// replay that made a new registration) ends the round, and the next round is planned afresh.
type Plan struct {
	Decision Decision
	// Keep is the registration that serves the spec (decideKeep).
	Keep *providers.Registration
	// Steps, in the order they run.
	Steps []Step
	// Conflict explains why neither creating nor adopting is safe (decideConflict).
	Conflict string
	// KeptTwins are twins left in place because policies.twins is Keep.
	KeptTwins []providers.Registration
	// NearTwins are foreign registrations that differ from the spec only by a trailing slash or
	// the scheme: reported, never touched.
	NearTwins []providers.Registration
	// Unproven are registrations for the desired URL that cannot be proven ours on a provider
	// without markers and are not adopted: reported, never changed or pruned.
	Unproven []providers.Registration
	// Stall says why the subscription cannot go on (decideStall), StallReason as a condition
	// reason.
	Stall       string
	StallReason hookv1.Reason
	// Unfit are foreign registrations that do not fit the provider's shape: skipped as
	// foreign, reported once per account.
	Unfit []providers.Registration
}

// Changes reports whether the plan writes anything at the provider or to the signing Secret.
func (p Plan) Changes() bool { return len(p.Steps) > 0 }

// Adopts reports whether keeping p.Keep makes it this subscription's: it is not the
// registration the status records, carries no marker of this subscription, and its secret is
// not held. `hookwarden plan` and the manager's reconcile span both say "adopt" by it.
func (p Plan) Adopts(in PlanInput) bool {
	return p.Keep != nil && p.Keep.ID != in.RecordedID && !Marked(*p.Keep, in.Desired.Owner) && !in.HeldSecrets[p.Keep.ID]
}

// Prunes are the plan's prune steps.
func (p Plan) Prunes() []Step { return p.stepsOf(StepPrune) }

// Drift is what the plan's update step changes (nil when there is none).
func (p Plan) Drift() []string {
	for _, s := range p.Steps {
		if s.Kind == StepUpdate {
			return s.Drift
		}
	}
	return nil
}

// RecoversSecret reports whether the plan gets a secret for a registration whose secret is not
// held: by replay, fetch, setting a new one, or a replacement.
func (p Plan) RecoversSecret() bool {
	for _, s := range p.Steps {
		switch {
		case s.Kind == StepReplay, s.Kind == StepFetchSecret, s.Kind == StepSetSecret:
			return true
		case s.Kind == StepReplace && len(s.Drift) == 0:
			return true
		}
	}
	return false
}

// rotates reports whether the plan carries out a requested rotation.
func (p Plan) Rotates() bool {
	for _, s := range p.Steps {
		if s.Rotation {
			return true
		}
	}
	return false
}

func (p Plan) stepsOf(k StepKind) []Step {
	var out []Step
	for _, s := range p.Steps {
		if s.Kind == k {
			out = append(out, s)
		}
	}
	return out
}

// ComputePlan is the plan of one round: a pure function of in.
func ComputePlan(in PlanInput) Plan {
	var p Plan
	candidates, adoptables, taken, prunes := sortObserved(in, &p)
	if p.Stall != "" {
		// This subscription's own registration cannot be read: acting on the rest (creating
		// another, pruning one) would be a guess.
		p.Decision = Stall
		p.NearTwins, p.Unproven = nil, nil
		return p
	}
	if len(candidates) == 0 && len(taken) > 0 {
		// Another subscription here serves this target already: adopting its registration, a
		// look-alike of it or a new one would make two subscriptions answer for one URL.
		p.Decision, p.Stall, p.StallReason = Stall, claimedMessage(in, taken), hookv1.ReasonOwnedByAnother
		p.NearTwins, p.Unproven = nil, nil
		return p
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
		// Neither create (a second hook for the same URL) nor adopt: wait for a human, and
		// prune nothing meanwhile (ours at an old URL may be the only working hook).
		p.Decision = Conflict
		return p
	}
	p.Conflict = ""
	if len(candidates) == 0 {
		p.Decision = Create
		p.Steps = append(p.Steps, Step{Kind: StepCreate, Desired: in.Desired, Key: CreateKey(in.Desired.Owner.UID, in.Generation, in.RecordedID),
			Secret: SecretSourceFor(in.Caps), Ping: in.CanPing})
		p.Steps = append(p.Steps, tail(in, "", prunes)...)
		return p
	}
	keep := pickKeeper(in, candidates)
	p.Decision = Keep
	p.Keep = &keep
	for _, c := range candidates {
		if c.ID == keep.ID {
			continue
		}
		if in.Twins == hookv1.TwinsKeep {
			p.KeptTwins = append(p.KeptTwins, c)
		} else {
			prunes = append(prunes, PruneStep(c, PruneTwin))
		}
	}
	if replace, ok := replacement(in, keep); ok {
		// The round ends with the replacement: the next one keeps it, marks its secret
		// current and prunes keep (retired) with the rest.
		p.Steps = append(p.Steps, replace)
		return p
	}
	p.Steps = append(p.Steps, keepSteps(in, keep)...)
	p.Steps = append(p.Steps, tail(in, keep.ID, prunes)...)
	return p
}

// MaxRounds bounds the rounds of one reconcile: a replacement and the round after it, a replay
// that turned into a new registration, one AlreadyExists refusal; more means the plan does not
// settle, which is a bug to report, not to loop on.
const MaxRounds = 6

// NewRegistrationID stands for the id of a registration a foreseen round creates.
const NewRegistrationID = "<new>"

// PlanRounds plans in round by round, as a reconcile does, as far as the rounds can be foreseen
// without the provider: after a round that ends with a replacement, the replacement joins the
// observed list (as NewRegistrationID, its secret held) and the replaced registration is retired,
// and the next round is planned; a round without such a step is the last. It returns each
// round's input and plan. (A replay the provider answers with a new registration cannot be
// foreseen: the rounds end at the plan that holds it.)
func PlanRounds(in PlanInput) ([]PlanInput, []Plan) {
	var ins []PlanInput
	var plans []Plan
	for len(plans) < MaxRounds {
		p := ComputePlan(in)
		ins, plans = append(ins, in), append(plans, p)
		if len(p.Steps) == 0 || !p.Steps[len(p.Steps)-1].EndsRound() {
			break
		}
		in = afterReplacement(in, p.Steps[len(p.Steps)-1])
	}
	return ins, plans
}

// afterReplacement is in once the replacement st made exists, as the executor leaves it: the
// new registration on the account with its secret stored, the replaced one retired.
func afterReplacement(in PlanInput, st Step) PlanInput {
	next := in
	made := providers.Registration{ID: NewRegistrationID, URL: st.Desired.URL, Events: st.Desired.Events, Description: st.Desired.Description, Disabled: st.Desired.Disabled}
	if in.Caps.Markers {
		made.Owner, made.CreateKey = st.Desired.Owner, st.Key
	}
	for _, r := range in.Observed {
		if r.Created.After(made.Created) {
			made.Created = r.Created.Add(time.Second)
		}
	}
	next.Observed = append(slices.Clone(in.Observed), made)
	next.Rounds = Rounds{Retired: maps.Clone(in.Rounds.Retired), ReplayRefused: maps.Clone(in.Rounds.ReplayRefused), Rotated: in.Rounds.Rotated || st.Rotation}
	next.Rounds.Retire(st.Registration.ID)
	next.RotateRequested = in.RotateRequested && !next.Rounds.Rotated
	if st.Secret != SecretNone {
		next.HeldSecrets = maps.Clone(in.HeldSecrets)
		if next.HeldSecrets == nil {
			next.HeldSecrets = map[string]bool{}
		}
		next.HeldSecrets[NewRegistrationID] = true
	}
	if st.Secret == SecretChosen {
		next.PendingSecret = false // confirmed under the new id
	}
	return next
}

// sortObserved puts each observed registration where its relation to the spec says: the
// candidates to keep, the unproven ones that may be adopted, those another subscription
// claimed, the prunes; what is only reported, and a conflict or a stall, go to p.
func sortObserved(in PlanInput, p *Plan) (candidates, adoptables, taken []providers.Registration, prunes []Step) {
	desiredLoose, _ := matching.LooseKey(in.Desired.URL)
	own := in.Ownership()
	for _, r := range in.Observed {
		switch classify(in, own, r, desiredLoose) {
		case candidate:
			candidates = append(candidates, r)
		case stale:
			prunes = append(prunes, PruneStep(r, PruneStale))
		case retired:
			prunes = append(prunes, PruneStep(r, PruneRotated))
		case nearTwin:
			p.NearTwins = append(p.NearTwins, r)
		case conflicting:
			p.Conflict = conflictMessage(in, r)
		case unproven:
			adoptables = append(adoptables, r)
		case lookalike:
			p.Unproven = append(p.Unproven, r)
		case unfitOurs:
			p.Stall, p.StallReason = unfitMessage(r), hookv1.ReasonUnfitRegistration
		case claimed:
			taken = append(taken, r)
		case unfitForeign:
			p.Unfit = append(p.Unfit, r)
		}
	}
	return candidates, adoptables, taken, prunes
}

// replacement returns the step that replaces keep by a new registration, make-before-break,
// when keep cannot be kept: its secret is not held and the provider can neither give it back
// nor let us set a new one, or a field drifted that the provider cannot change in place.
func replacement(in PlanInput, keep providers.Registration) (Step, bool) {
	replace := Step{Kind: StepReplace, Registration: keep, Desired: in.Desired, Key: RotateKey(in.Desired.Owner.UID, in.Generation, keep.ID), Secret: SecretSourceFor(in.Caps)}
	if fields := recreateFields(in, keep); len(fields) > 0 {
		replace.Drift = fields
		return replace, true
	}
	if !needsSecret(in, keep) {
		if in.RotateRequested && in.Caps.Secret != providers.SecretNone && (in.Caps.Secret != providers.SecretClientChosen || !updatesInPlace(in.Caps)) {
			// A requested rotation where no secret can be set in place: a new registration
			// with a new secret, make-before-break (keep goes once the new one is current).
			replace.Rotation = true
			return replace, true
		}
		return Step{}, false
	}
	switch in.Caps.Secret {
	case providers.SecretClientChosen:
		if !updatesInPlace(in.Caps) {
			return replace, true // no update could carry the new secret
		}
		return Step{}, false // set anew on keep itself
	case providers.SecretReadable, providers.SecretFetched:
		return Step{}, false // read back from keep
	}
	if replayable(in, keep) {
		return Step{}, false
	}
	return replace, true
}

// updatesInPlace reports whether the provider has an update at all: one that cannot change a
// registration's URL or its events in place (Calendly) has none, so a secret cannot be set on an
// existing registration either.
func updatesInPlace(caps providers.Capabilities) bool {
	return caps.Recreate&(providers.FieldURL|providers.FieldEvents) != providers.FieldURL|providers.FieldEvents
}

// keepSteps get keep's secret where it is not held, then bring keep to the spec and make its
// secret the current one.
func keepSteps(in PlanInput, keep providers.Registration) []Step {
	var steps []Step
	fields := Drift(in, keep)
	if needsSecret(in, keep) {
		switch in.Caps.Secret {
		case providers.SecretClientChosen:
			// The update that sets the new secret carries the whole spec: it repairs the drift too.
			steps = append(steps, Step{Kind: StepSetSecret, Registration: keep, Desired: in.Desired})
			fields = nil
		case providers.SecretReadable, providers.SecretFetched:
			steps = append(steps, Step{Kind: StepFetchSecret, Registration: keep})
		default:
			// Before fixing drift: the replay must repeat the original create's parameters,
			// which keep still has until it is updated.
			steps = append(steps, Step{Kind: StepReplay, Registration: keep, Desired: OriginalCreate(keep), Key: keep.CreateKey})
		}
	}
	if len(steps) == 0 && in.RotateRequested && in.Caps.Secret == providers.SecretClientChosen {
		// A requested rotation, in place: the new secret is stored as pending (the receiver
		// accepts it beside the old one) before the provider is told, and replaces the old one
		// once the provider took it. The update carries the whole spec: it repairs drift too.
		steps = append(steps, Step{Kind: StepSetSecret, Registration: keep, Desired: in.Desired, Rotation: true})
		fields = nil
	}
	if len(fields) > 0 {
		steps = append(steps, Step{Kind: StepUpdate, Registration: keep, Desired: in.Desired, Drift: fields})
	}
	setsSecret := len(steps) > 0 && steps[0].Kind == StepSetSecret // which makes it current
	if keep.ID != in.CurrentID && in.Caps.Secret != providers.SecretNone && !setsSecret {
		steps = append(steps, Step{Kind: StepMarkCurrent, Registration: keep})
	}
	return steps
}

// tail forgets the secret of a vanished recorded registration and prunes, once the kept (or
// created) registration is current.
func tail(in PlanInput, keepID string, prunes []Step) []Step {
	var steps []Step
	if v := vanished(in); v != "" && v != keepID {
		steps = append(steps, Step{Kind: StepForget, ID: v})
	}
	sort.SliceStable(prunes, func(i, j int) bool { return prunes[i].Registration.ID < prunes[j].Registration.ID })
	return append(steps, prunes...)
}

// replayable reports whether keep's original create can be replayed to get its secret back:
// the provider replays creates by key, keep carries its key, and it is this incarnation's.
func replayable(in PlanInput, keep providers.Registration) bool {
	return in.Caps.ReplayableCreate && keep.CreateKey != "" && keep.Owner == in.Desired.Owner && !in.Rounds.ReplayRefused[keep.ID]
}

// OriginalCreate is what keep was created with, as the provider reports it: a replay must send
// the same parameters.
func OriginalCreate(keep providers.Registration) providers.Desired {
	return providers.Desired{URL: keep.URL, Events: keep.Events, Description: keep.Description, Owner: keep.Owner}
}

// SecretSourceFor is how a new registration's secret is obtained on this provider.
func SecretSourceFor(caps providers.Capabilities) SecretSource {
	switch caps.Secret {
	case providers.SecretClientChosen:
		return SecretChosen
	case providers.SecretNone:
		return SecretNone
	}
	return SecretReturned
}

// vanished returns the recorded registration's id when the account no longer has it and its
// secret is held ("" otherwise).
func vanished(in PlanInput) string {
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
func needsSecret(in PlanInput, keep providers.Registration) bool {
	switch in.Caps.Secret {
	case providers.SecretNone:
		return false
	case providers.SecretClientChosen:
		return !in.HeldSecrets[keep.ID] || in.PendingSecret
	}
	return !in.HeldSecrets[keep.ID]
}

// Keeper is the registration a subscription that records none of twins (registrations for one
// canonical URL) keeps of them: one whose secret its signing Secret holds (held), else the
// oldest. `hookwarden import` names it in the one manifest it writes for them.
func Keeper(twins []providers.Registration, held map[string]bool) providers.Registration {
	return pickKeeper(PlanInput{HeldSecrets: held}, twins)
}

// pickKeeper prefers, in order: the recorded registration whose secret we hold, any whose secret
// we hold, the recorded one, one carrying our marker, then the oldest. Keeping the one whose
// secret we hold avoids a rotation.
func pickKeeper(in PlanInput, cs []providers.Registration) providers.Registration {
	score := func(r providers.Registration) int {
		s := 0
		if in.HeldSecrets[r.ID] {
			s += 8
		}
		if r.ID == in.RecordedID {
			s += 4
		}
		if Marked(r, in.Desired.Owner) {
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

// Drift names, as Drift lists them.
const (
	DriftURL         = "url"
	DriftEvents      = "events"
	DriftDescription = "description"
	DriftDisabled    = "disabled"
	DriftMarker      = "ownership marker"
)

// driftFields is the one mapping between a registration's fields (providers.Field bits) and
// their names in steps, logs and the command line, in the order Drift lists them.
var driftFields = []struct {
	field providers.Field
	name  string
}{
	{providers.FieldURL, DriftURL},
	{providers.FieldEvents, DriftEvents},
	{providers.FieldDescription, DriftDescription},
	{providers.FieldDisabled, DriftDisabled},
	{providers.FieldMarker, DriftMarker},
}

// FieldNames names the fields set in f, in Drift's order (nil for none).
func FieldNames(f providers.Field) []string {
	var out []string
	for _, d := range driftFields {
		if f&d.field != 0 {
			out = append(out, d.name)
		}
	}
	return out
}

// Drift lists the fields of r that differ from the spec (DriftedFields, by name), then the
// provider-specific settings the provider reports as off (Misconfigured).
func Drift(in PlanInput, r providers.Registration) []string {
	return append(FieldNames(DriftedFields(in, r)), r.Misconfigured...)
}

// DriftedFields are the fields of r that differ from the spec, among those the provider has: a
// field it does not have (a GitHub hook's description or marker) is never "changed", which
// would be perpetual drift. The URL compares as a string: a registration that is only
// canonically equal is rewritten to the canonical spelling.
func DriftedFields(in PlanInput, r providers.Registration) providers.Field {
	d, caps := in.Desired, in.Caps
	var out providers.Field
	if r.URL != d.URL {
		out |= providers.FieldURL
	}
	if !matching.SameEvents(r.Events, d.Events) {
		out |= providers.FieldEvents
	}
	if caps.Has(providers.FieldDescription) && r.Description != d.Description {
		out |= providers.FieldDescription
	}
	if caps.Has(providers.FieldDisabled) && r.Disabled != d.Disabled && (in.SpecEdited || !pausedByProvider(d, r)) {
		out |= providers.FieldDisabled
	}
	if caps.Has(providers.FieldMarker) && r.Owner != d.Owner {
		out |= providers.FieldMarker
	}
	return out &^ caps.ReadOnly // reported (ReadOnlyDrift), never repaired
}

// ReadOnlyDrift says how the fields of r that the provider's API cannot change
// (Capabilities.ReadOnly: a GitHub App's events) differ from the spec ("" when they do not).
// Events ["*"] take whatever the provider's settings say.
func ReadOnlyDrift(in PlanInput, r providers.Registration) string {
	want := in.Desired.Events
	if in.Caps.ReadOnly&providers.FieldEvents == 0 || slices.Equal(want, []string{"*"}) || matching.SameEvents(r.Events, want) {
		return ""
	}
	have := matching.NormalizeEvents(r.Events)
	want = matching.NormalizeEvents(want)
	missing := slices.DeleteFunc(slices.Clone(want), func(e string) bool { return slices.Contains(have, e) })
	extra := slices.DeleteFunc(slices.Clone(have), func(e string) bool { return slices.Contains(want, e) })
	return fmt.Sprintf("events differ from the provider's settings (not subscribed there: %v; subscribed there, not in spec.events: %v): they are set in the provider's settings only, never through its API, so this is reported, not repaired; align spec.events or the settings (events [\"*\"] takes the settings as they are)", missing, extra)
}

// pausedByProvider reports whether r is disabled although the spec wants it enabled because the
// provider disabled it after failed deliveries (its health says so): no drift to repair at once,
// which would enable it while the endpoint still fails (Stripe disables it again and sends
// nothing meanwhile). The recovery path enables it once the endpoint answers.
func pausedByProvider(d providers.Desired, r providers.Registration) bool {
	return !d.Disabled && r.Disabled && r.Health != nil && r.Health.State == providers.HealthDisabled
}

// recreateFields are the drifted fields of keep the provider can only change by a new
// registration.
func recreateFields(in PlanInput, keep providers.Registration) []string {
	return FieldNames(DriftedFields(in, keep) & in.Caps.Recreate)
}
