package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// The executor carries a plan out. It decides nothing: which steps run, in which order, with
// which keys and how each new secret is obtained all come from the plan, which it never
// changes, and it reads no provider capability. It stops at the first error. A step that
// changes which registration is kept (a replacement; a replay the provider answered with a new
// registration, or refused) ends the round: what it established goes into rounds, and the
// caller plans again.

// outcome is what one round established.
type outcome struct {
	// kept is the registration that serves the spec, once every step ran.
	kept providers.Registration
	// replan: a step ended the round; plan again (from the cached list) with the rounds.
	replan bool
}

// execute runs p's steps. status.endpointID names the kept registration as soon as it exists
// and its secret is held: after a create, or once keep's secret steps are done, so a later step
// that fails leaves it recorded.
func (s *session) execute(ctx context.Context, p decide.Plan, rs *decide.Rounds) (outcome, error) {
	sub := s.sub
	switch p.Decision {
	case decide.Conflict:
		s.r.event(sub, corev1.EventTypeWarning, hookv1.ReasonConflict, "Reconcile", p.Conflict)
		return outcome{}, decide.NewWait(hookv1.ReasonConflict, resyncInterval(sub), "%s", p.Conflict)
	case decide.Stall:
		return outcome{}, decide.NewStallAtProvider(p.StallReason, "%s", p.Stall)
	}
	var kept providers.Registration
	if p.Keep != nil {
		kept = *p.Keep
	}
	pruned := map[decide.PruneReason][]providers.Registration{}
	defer s.reportPruned(pruned)
	for _, st := range p.Steps {
		if st.Kind >= decide.StepUpdate && kept.ID != "" {
			sub.Status.EndpointID = kept.ID
		}
		var err error
		switch st.Kind {
		case decide.StepCreate:
			kept, err = s.runCreate(ctx, st)
		case decide.StepReplay:
			var same bool
			same, err = s.runReplay(ctx, st, rs)
			if err == nil && !same {
				return outcome{replan: true}, nil
			}
		case decide.StepFetchSecret:
			err = s.runFetchSecret(ctx, st)
		case decide.StepSetSecret:
			kept, err = s.runSetSecret(ctx, st)
		case decide.StepReplace:
			if err = s.runReplace(ctx, st); err == nil {
				rs.Retire(st.Registration.ID)
				return outcome{replan: true}, nil
			}
		case decide.StepUpdate:
			kept, err = s.runUpdate(ctx, st)
		case decide.StepMarkCurrent:
			err = s.markCurrent(ctx, st.Registration.ID)
		case decide.StepForget:
			err = s.forgetSecret(ctx, st.ID)
		case decide.StepPrune:
			err = s.runPrune(ctx, st)
			if err == nil {
				pruned[st.Why] = append(pruned[st.Why], st.Registration)
			}
		default:
			err = fmt.Errorf("plan step %v has no executor", st.Kind)
		}
		if err != nil {
			return outcome{}, err
		}
	}
	sub.Status.EndpointID = kept.ID
	return outcome{kept: kept}, nil
}

// runCreate registers a new webhook, stores its secret, makes it current and records it.
func (s *session) runCreate(ctx context.Context, st decide.Step) (providers.Registration, error) {
	reg, err := s.create(ctx, st)
	if err != nil {
		return reg, err
	}
	sub := s.sub
	sub.Status.EndpointID = reg.ID
	s.r.audit(ctx, sub, actionCreate, reg.ID, "no registration at the provider serves this spec")
	s.r.event(sub, corev1.EventTypeNormal, hookv1.ReasonCreated, "Create", "registered %s for %s", reg.ID, reg.URL)
	if st.Secret != decide.SecretNone && reg.ID != s.signing.Current {
		if err := s.markCurrent(ctx, reg.ID); err != nil {
			return reg, err
		}
	}
	if st.Ping {
		s.ping(ctx, reg.ID)
	}
	return reg, nil
}

// runReplay repeats keep's original create with its key. same reports that the provider
// answered with keep itself, secret included (recovered). Otherwise the round ends: either the
// provider's idempotency window passed and the replay created a new registration (its secret
// stored, it replaces keep), or the provider refused the replay (parameters changed since, or
// an answer without the secret), and the next round replaces keep.
func (s *session) runReplay(ctx context.Context, st decide.Step, rs *decide.Rounds) (same bool, err error) {
	keep := st.Registration
	reg, err := s.ops.Create(ctx, st.Desired, st.Key)
	switch {
	case err == nil && reg.Secret != "":
	case err == nil || providers.KindOf(err) == providers.Permanent:
		rs.RefuseReplay(keep.ID)
		return false, nil
	default:
		return false, decide.FromProvider("recovering the signing secret of "+keep.ID, err)
	}
	if err := s.storeSecret(ctx, reg.ID, reg.Secret); err != nil {
		return false, err
	}
	if reg.ID == keep.ID {
		s.ops.Remember(keep) // the replayed body is the original; keep the current view
		s.r.audit(ctx, s.sub, actionRecover, keep.ID, "signing secret not held: replayed the original create (same idempotency key)")
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRecovered, "RecoverSecret", "recovered the signing secret of %s by replaying its create", keep.ID)
		return true, nil
	}
	rs.Retire(keep.ID)
	s.r.audit(ctx, s.sub, actionRotate, reg.ID, "signing secret of "+keep.ID+" not held and its create no longer replays: the replay created a new registration")
	s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "RecoverSecret", "signing secret of %s was lost; rotated to %s", keep.ID, reg.ID)
	return false, nil
}

// runFetchSecret reads keep's secret back from the provider and stores it.
func (s *session) runFetchSecret(ctx context.Context, st decide.Step) error {
	keep := st.Registration
	secret, err := s.ops.FetchSecret(ctx, keep.ID)
	if err != nil {
		return decide.FromProvider("reading the signing secret of "+keep.ID, err)
	}
	if err := s.storeSecret(ctx, keep.ID, secret); err != nil {
		return err
	}
	s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRecovered, "RecoverSecret", "read the signing secret of %s back from the provider", keep.ID)
	return nil
}

// runSetSecret sets a client-chosen secret on keep in place (same id), with an update that also
// carries the rest of the spec. The secret is pending in the Secret first, so the receiver
// accepts it (beside the old one, if held) from the moment the provider might sign with it.
func (s *session) runSetSecret(ctx context.Context, st decide.Step) (providers.Registration, error) {
	keep := st.Registration
	wasHeld := s.signing.Secrets[keep.ID] != nil
	secret, err := s.pendingSecret(ctx)
	if err != nil {
		return keep, err
	}
	d := st.Desired
	d.Secret = secret
	reg, err := s.ops.Update(ctx, keep.ID, d)
	if err != nil {
		return keep, decide.FromProvider("setting a new signing secret on "+keep.ID, err)
	}
	if err := s.confirmPending(ctx, keep.ID, secret); err != nil {
		return reg, err
	}
	why := "the signing secret was not held: set a new one in place"
	if wasHeld {
		why = "finished setting the pending signing secret"
	}
	s.r.audit(ctx, s.sub, actionSetSecret, keep.ID, why)
	if wasHeld {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "SetSecret", "finished setting the pending signing secret on %s", keep.ID)
	} else {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "SetSecret", "the signing secret of %s was not held; set a new one on it in place", keep.ID)
	}
	return reg, nil
}

// runReplace creates the registration that replaces keep, its secret stored; keep goes in the
// next round, once the new one is current.
func (s *session) runReplace(ctx context.Context, st decide.Step) error {
	keep := st.Registration
	reg, err := s.create(ctx, st)
	if err != nil {
		return err
	}
	if len(st.Drift) > 0 {
		s.r.audit(ctx, s.sub, actionCreate, reg.ID, fmt.Sprintf("replaces %s: the provider cannot change %v in place", keep.ID, st.Drift))
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonUpdated, "Recreate", "replaced %s by %s: the provider cannot change %v in place", keep.ID, reg.ID, st.Drift)
		return nil
	}
	s.r.audit(ctx, s.sub, actionRotate, reg.ID, "signing secret of "+keep.ID+" not held: created a replacement, "+keep.ID+" goes once its secret is stored")
	s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonSecretRotated, "RotateSecret", "signing secret of %s is not held; rotated to %s", keep.ID, reg.ID)
	return nil
}

// runUpdate brings keep to the spec in place, resending the secret it verifies with (providers
// whose update clears an omitted secret need it; the others ignore it).
func (s *session) runUpdate(ctx context.Context, st decide.Step) (providers.Registration, error) {
	keep := st.Registration
	d := st.Desired
	d.Secret = string(s.signing.Secrets[keep.ID])
	reg, err := s.ops.Update(ctx, keep.ID, d)
	if err != nil {
		return keep, decide.FromProvider("updating registration "+keep.ID, err)
	}
	s.r.audit(ctx, s.sub, actionUpdate, keep.ID, fmt.Sprintf("drifted from the spec: %v", st.Drift))
	s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonUpdated, "Update", "updated %s in place: %v", keep.ID, st.Drift)
	return reg, nil
}

// runPrune deletes a twin, a stale or a replaced registration and forgets its secret.
func (s *session) runPrune(ctx context.Context, st decide.Step) error {
	r := st.Registration
	if err := s.ops.Delete(ctx, r.ID); err != nil {
		return decide.FromProvider("deleting "+string(st.Why)+" registration "+r.ID, err)
	}
	s.r.audit(ctx, s.sub, actionPrune, r.ID, pruneWhy(st.Why, s.sub.Status.EndpointID))
	if st.Why == decide.PruneTwin {
		s.sub.Status.TwinsPruned++
	}
	return s.forgetSecret(ctx, r.ID)
}

// reportPruned aggregates the prune Events per reason: the events API folds events that differ
// only in their note into one series.
func (s *session) reportPruned(deleted map[decide.PruneReason][]providers.Registration) {
	if twins := deleted[decide.PruneTwin]; len(twins) > 0 {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonTwinsPruned, "Prune", "deleted %d twin registration(s): %s", len(twins), decide.RegistrationIDs(twins))
	}
	var other []providers.Registration
	other = append(other, deleted[decide.PruneStale]...)
	other = append(other, deleted[decide.PruneRotated]...)
	if len(other) > 0 {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonDeleted, "Prune", "deleted replaced registration(s): %s", decide.RegistrationIDs(other))
	}
}

// pruneWhy says, for the audit log, why a registration was deleted beside the kept one.
func pruneWhy(why decide.PruneReason, kept string) string {
	switch why {
	case decide.PruneTwin:
		return "twin of " + kept + " (same canonical URL)"
	case decide.PruneStale:
		return "stale: ours, for a URL the spec no longer names"
	case decide.PruneRotated:
		return "replaced by " + kept
	}
	return string(why)
}

// create registers a webhook for a create or replace step and makes sure its secret is stored
// whatever goes wrong, as the step says it is obtained.
func (s *session) create(ctx context.Context, st decide.Step) (providers.Registration, error) {
	if st.Secret == decide.SecretChosen {
		return s.createWithOwnSecret(ctx, st.Desired, st.Key)
	}
	reg, err := s.ops.Create(ctx, st.Desired, st.Key)
	if err != nil {
		if reg.ID != "" && reg.Secret != "" {
			// Created, but a follow-up step failed (Stripe: disabling after create): the secret
			// exists only in this response, so keep it before reporting the error.
			if serr := s.storeSecret(ctx, reg.ID, reg.Secret); serr != nil {
				return reg, errors.Join(decide.FromProvider("creating registration", err), serr)
			}
		}
		return reg, decide.FromProvider("creating registration", err)
	}
	if err := s.afterCreate(ctx, reg); err != nil {
		return reg, err
	}
	if st.Secret == decide.SecretNone {
		return reg, nil
	}
	if reg.Secret == "" {
		return reg, fmt.Errorf("provider returned no signing secret for new registration %s", reg.ID)
	}
	return reg, s.storeSecret(ctx, reg.ID, reg.Secret)
}

// createWithOwnSecret creates a registration with a secret we chose. The secret is written to
// the signing Secret (pending) before the provider hears of it, so a crash anywhere leaves at
// most one registration, and the Secret holding the secret it verifies with: after a crash the
// next reconcile finds the registration (adopting it if it cannot be proven ours) and sets the
// pending secret on it, which is then confirmed under its id.
func (s *session) createWithOwnSecret(ctx context.Context, d providers.Desired, key string) (providers.Registration, error) {
	secret, err := s.pendingSecret(ctx)
	if err != nil {
		return providers.Registration{}, err
	}
	d.Secret = secret
	reg, err := s.ops.Create(ctx, d, key)
	if err != nil {
		// The pending secret stays, refused or not: the next attempt sends the same one, so a
		// refusal writes nothing (a rewritten Secret would wake the subscription at once and
		// turn a stall into a loop), and an outcome that is unknown (a timeout) needs it anyway.
		return reg, decide.FromProvider("creating registration", err)
	}
	if err := s.afterCreate(ctx, reg); err != nil {
		return reg, err
	}
	return reg, s.confirmPending(ctx, reg.ID, secret)
}

func (s *session) afterCreate(ctx context.Context, reg providers.Registration) error {
	if s.r.AfterCreate == nil {
		return nil
	}
	return s.r.AfterCreate(ctx, s.sub, reg)
}
