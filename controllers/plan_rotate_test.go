package controllers

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/providers"
)

// TestPlanRotation: a requested rotation (hookwarden.io/rotate-requested-at) of a secret that is
// held becomes one step, make-before-break: set in place where the client chooses the secret
// and the provider can update, a new registration otherwise; nothing where deliveries are
// unsigned; never twice in one reconcile.
func TestPlanRotation(t *testing.T) {
	rotated := func(s decide.Step) decide.Step { s.Rotation = true; return s }
	cases := []struct {
		reason   string
		caps     providers.Capabilities
		observed []providers.Registration
		held     []string
		pending  bool
		request  bool
		rounds   decide.Rounds
		want     decide.Plan
	}{
		{
			reason:   "no request: nothing to do",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0)},
			held:     []string{"we_1"},
			want:     keeps(reg("we_1", 0)),
		},
		{
			reason:   "Stripe shows a secret only at create: a new registration replaces keep (pruned in the next round)",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0)},
			held:     []string{"we_1"},
			request:  true,
			want:     keeps(reg("we_1", 0), rotated(replaceStep(reg("we_1", 0)))),
		},
		{
			reason:   "GitHub-like (client-chosen, updatable): a new secret set on the same hook",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("h1", 0)},
			held:     []string{"h1"},
			request:  true,
			want:     keeps(hook("h1", 0), rotated(setSecretStep(hook("h1", 0)))),
		},
		{
			reason:   "a set-secret already pending (a crash mid-rotation) is finished first, and is the rotation",
			caps:     markerlessCaps,
			observed: []providers.Registration{hook("h1", 0)},
			held:     []string{"h1"},
			pending:  true,
			request:  true,
			want:     keeps(hook("h1", 0), setSecretStep(hook("h1", 0))),
		},
		{
			reason:   "client-chosen without an update (Calendly-like): a new registration",
			caps:     noUpdateCaps,
			observed: []providers.Registration{hook("h1", 0)},
			held:     []string{"h1"},
			request:  true,
			want:     keeps(hook("h1", 0), rotated(replaceStep(hook("h1", 0)))),
		},
		{
			reason:   "readable or fetched secrets: a new registration (reading back gives the same secret)",
			caps:     fetchedCaps,
			observed: []providers.Registration{reg("we_1", 0)},
			held:     []string{"we_1"},
			request:  true,
			want:     keeps(reg("we_1", 0), rotated(replaceStep(reg("we_1", 0)))),
		},
		{
			reason:   "unsigned deliveries: nothing to rotate",
			caps:     unsignedCaps,
			observed: []providers.Registration{reg("we_1", 0)},
			request:  true,
			want:     keeps(reg("we_1", 0)),
		},
		{
			reason:   "a lost secret is recovered as usual, which already gives a new one: no second rotation",
			caps:     stripeCaps,
			observed: []providers.Registration{reg("we_1", 0)},
			request:  true,
			want:     keeps(reg("we_1", 0), replayStep(reg("we_1", 0)), markStep(reg("we_1", 0))),
		},
		{
			reason:  "nothing registered: the create makes a new secret",
			caps:    stripeCaps,
			request: true,
			want:    creates(),
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			in := decide.PlanInput{
				Desired: planDesired(planURL), Generation: 1, Observed: c.observed, Caps: c.caps,
				RecordedID: "", HeldSecrets: heldSet(c.held), CurrentID: currentOf("", firstOf(c.held), c.held),
				PendingSecret: c.pending, RotateRequested: c.request, Rounds: c.rounds,
			}
			if len(c.observed) > 0 {
				in.RecordedID = c.observed[0].ID
				in.CurrentID = currentOf("", in.RecordedID, c.held)
			}
			got := decide.ComputePlan(in)
			if diff := cmp.Diff(c.want, got, planStepDetail); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if got.Rotates() != (c.request && hasRotation(c.want)) {
				t.Errorf("rotates() = %v", got.Rotates())
			}
		})
	}
}

func firstOf(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func hasRotation(p decide.Plan) bool {
	for _, s := range p.Steps {
		if s.Rotation {
			return true
		}
	}
	return false
}

func TestPendingRotationConfirmedAgainstTheAPIServer(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := hookv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cached := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders",
		Annotations: map[string]string{hookv1.AnnotationRotateRequestedAt: "1700000000"}}}
	live := cached.DeepCopy()
	live.Status.LastHandledRotateAt = "1700000000" // written by the reconcile that rotated
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(live).WithStatusSubresource(live).Build()
	r := &Reconciler{APIReader: api}
	got, err := r.pendingRotation(context.Background(), cached.DeepCopy())
	if err != nil || got != "" {
		t.Errorf("pendingRotation = %q, %v; want none: the API server says the request was handled, only the cache lags (a second rotation would replace the new registration)", got, err)
	}
	live.Status.LastHandledRotateAt = "1600000000"
	if err := api.Status().Update(context.Background(), live); err != nil {
		t.Fatal(err)
	}
	if got, err := r.pendingRotation(context.Background(), cached.DeepCopy()); err != nil || got != "1700000000" {
		t.Errorf("pendingRotation = %q, %v; want the request, not yet handled on the API server", got, err)
	}
}
