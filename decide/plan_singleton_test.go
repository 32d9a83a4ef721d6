package decide_test

import (
	"strings"
	"testing"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// singletonCaps are a GitHub App webhook's: one registration per account, no marker, a secret
// the client chooses, events the API cannot change.
var singletonCaps = providers.Capabilities{
	Secret:            providers.SecretClientChosen,
	UpdateNeedsSecret: true,
	ReadOnly:          providers.FieldEvents,
	Singleton:         true,
}

// TestPlanSingleton: the account's one registration (a GitHub App's webhook) is created only
// where it has no URL, repaired in place whenever it is ours (never pruned as stale), adopted
// under Adopt only when it serves the desired URL (whatever its events, which the API cannot
// set), and otherwise a conflict that names why; its events never drift into an update.
func TestPlanSingleton(t *testing.T) {
	app := func(opts ...func(*providers.Registration)) providers.Registration {
		return decidetest.Hook("app", 0, opts...)
	}
	other := decidetest.WithEvents("issues")
	cases := []planCase{
		{
			reason: "no URL set (the list shows nothing): create, which sets it",
			want:   decidetest.Creates(),
		},
		{
			reason:   "ours, other events in the App's settings: kept, nothing written",
			observed: []providers.Registration{app(other)},
			recorded: "app",
			held:     []string{"app"},
			want:     decidetest.Keeps(app(other)),
		},
		{
			reason:   "ours at the URL the spec named before: repointed in place, not pruned",
			observed: []providers.Registration{app(decidetest.WithURL(decidetest.OldURL))},
			recorded: "app",
			held:     []string{"app"},
			want:     decidetest.KeepsUpdating(app(decidetest.WithURL(decidetest.OldURL)), "url"),
		},
		{
			reason:   "set by hand to the desired URL, other events, Adopt: adopted with a new secret",
			observed: []providers.Registration{app(other)},
			want:     decidetest.Keeps(app(other), decidetest.SetSecretStep(app(other))),
		},
		{
			reason:           "set by hand to the desired URL, Never: conflict, nothing written",
			observed:         []providers.Registration{app(other)},
			adoption:         hookv1.AdoptionNever,
			want:             decide.Plan{Unproven: []providers.Registration{app(other)}},
			conflictMentions: []string{"one registration (app)", "set by hand or by another cluster", "adoption is Never"},
		},
		{
			reason:           "set elsewhere by hand or another cluster, Adopt: conflict, never repointed",
			observed:         []providers.Registration{app(decidetest.WithURL(decidetest.ElseURL))},
			want:             decide.Plan{},
			conflictMentions: []string{decidetest.ElseURL, "set by hand or by another cluster", "whatever policies.adoption says"},
		},
		{
			reason:           "set elsewhere, Never: the same conflict",
			observed:         []providers.Registration{app(decidetest.WithURL(decidetest.ElseURL))},
			adoption:         hookv1.AdoptionNever,
			want:             decide.Plan{},
			conflictMentions: []string{decidetest.ElseURL, "left alone"},
		},
	}
	runPlanCases(t, decide.PlanInput{Caps: singletonCaps}, cases)
}

// TestPlanSingletonClaimedElsewhere: the account's one registration, kept for another
// subscription of this cluster at another URL, is a conflict naming that subscription.
func TestPlanSingletonClaimedElsewhere(t *testing.T) {
	in := decide.PlanInput{Caps: singletonCaps, Desired: decidetest.Desired(decidetest.URL),
		Observed:  []providers.Registration{decidetest.Hook("app", 0, decidetest.WithURL(decidetest.ElseURL))},
		ClaimedBy: map[string]string{"app": "shop/refunds"}}
	p := decide.ComputePlan(in)
	if p.Decision != decide.Conflict || len(p.Steps) > 0 || !strings.Contains(p.Conflict, "shop/refunds") {
		t.Fatalf("plan %v %q, want a conflict naming shop/refunds and no step", p.Decision, p.Conflict)
	}
}

// TestReadOnlyDrift: events the API cannot set are compared and described, never planned;
// ["*"] takes the provider's settings as they are.
func TestReadOnlyDrift(t *testing.T) {
	in := decide.PlanInput{Caps: singletonCaps, Desired: decidetest.Desired(decidetest.URL)}
	reg := decidetest.Hook("app", 0, decidetest.WithEvents("issues", "invoice.paid"))
	got := decide.ReadOnlyDrift(in, reg)
	for _, want := range []string{"not subscribed there: [checkout.session.completed]", "not in spec.events: [issues]", "never through its API"} {
		if !strings.Contains(got, want) {
			t.Errorf("ReadOnlyDrift = %q, want it to mention %q", got, want)
		}
	}
	if fields := decide.DriftedFields(in, reg); fields != 0 {
		t.Errorf("DriftedFields = %v, want none: read-only events are never repaired", decide.FieldNames(fields))
	}
	if got := decide.ReadOnlyDrift(in, decidetest.Hook("app", 0)); got != "" {
		t.Errorf("same events: ReadOnlyDrift = %q, want none", got)
	}
	in.Desired.Events = []string{"*"}
	if got := decide.ReadOnlyDrift(in, reg); got != "" {
		t.Errorf("events [*]: ReadOnlyDrift = %q, want none", got)
	}
	in.Caps.ReadOnly = 0
	in.Desired = decidetest.Desired(decidetest.URL)
	if got := decide.ReadOnlyDrift(in, reg); got != "" {
		t.Errorf("events writable: ReadOnlyDrift = %q, want none (Drift repairs them)", got)
	}
}
