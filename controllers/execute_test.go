package controllers

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/hookwarden/hookwarden/account"
	"github.com/hookwarden/hookwarden/account/accounttest"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// The executor's own tests: plans written by hand (not computed) run against an in-memory
// provider and a fake API server, so each checks one property of carrying a plan out: the
// order of provider calls, stopping at the first error, what is recorded after a partial run,
// where a round ends, and that the plan is never changed.

type execHarness struct {
	t        *testing.T
	provider *accounttest.FakeClient
	kube     client.Client
	sub      *hookv1.WebhookSubscription
	s        *session
	// failSecretWrites makes every write of the signing Secret fail.
	failSecretWrites bool
	// logSecretWrites puts each write of the signing Secret into the provider's call order, as
	// "write Secret", to show where writes fall among the provider's requests.
	logSecretWrites bool
}

func newExecHarness(t *testing.T, regs ...providers.Registration) *execHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := hookv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &execHarness{t: t, provider: accounttest.NewFakeClient(regs...)}
	h.sub = &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: decidetest.Me.Namespace, Name: decidetest.Me.Name, UID: "uid-orders-2", Generation: 3},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider:      hookv1.ProviderSpec{Type: hookv1.ProviderStripe, CredentialsRef: hookv1.SecretKeySelector{Name: "stripe-api"}},
			Events:        decidetest.Events,
			SigningSecret: hookv1.SigningSecretSpec{Name: "orders-signing"},
		},
	}
	refuse := func(obj client.Object) error {
		if _, ok := obj.(*corev1.Secret); ok {
			if h.failSecretWrites {
				return errors.New("the API server is unavailable")
			}
			if h.logSecretWrites {
				h.provider.Order = append(h.provider.Order, "write Secret")
			}
		}
		return nil
	}
	h.kube = fake.NewClientBuilder().WithScheme(scheme).WithObjects(h.sub).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	r := &Reconciler{Client: h.kube, APIReader: h.kube, Recorder: events.NewFakeRecorder(100), Metrics: unregisteredMetrics()}
	o, _ := newTestAccount(t, h.provider)
	h.s = &session{r: r, sub: h.sub, ops: o, caps: h.provider.Capabilities(), desired: decidetest.Desired(decidetest.URL), signing: account.SigningState{Secrets: map[string][]byte{}}}
	return h
}

// hold stores secrets for ids, as earlier reconciles would have, current the first.
func (h *execHarness) hold(ids ...string) {
	h.t.Helper()
	for i, id := range ids {
		if err := h.s.storeSecret(context.Background(), id, "whsec_"+id); err != nil {
			h.t.Fatal(err)
		}
		if i == 0 {
			if err := h.s.markCurrent(context.Background(), id); err != nil {
				h.t.Fatal(err)
			}
		}
	}
}

// secret is what the signing Secret holds now, read back from the API server.
func (h *execHarness) secret() account.SigningState {
	h.t.Helper()
	st, err := h.s.r.readSigningState(context.Background(), h.sub)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *execHarness) run(p decide.Plan) (outcome, decide.Rounds, error) {
	h.t.Helper()
	before := clonePlan(p)
	var rs decide.Rounds
	out, err := h.s.execute(context.Background(), p, &rs)
	if d := cmp.Diff(before, p); d != "" {
		h.t.Errorf("the executor changed the plan (-before +after):\n%s", d)
	}
	return out, rs, err
}

func clonePlan(p decide.Plan) decide.Plan {
	c := p
	c.Steps = slices.Clone(p.Steps)
	for i := range c.Steps {
		c.Steps[i].Drift = slices.Clone(p.Steps[i].Drift)
	}
	return c
}

func TestExecuteRunsStepsInOrder(t *testing.T) {
	stale := decidetest.Reg("we_0", 0, decidetest.WithURL(decidetest.OldURL))
	h := newExecHarness(t, stale)
	h.hold("we_0", "we_vanished")
	h.sub.Status.EndpointID = "we_vanished"
	p := decide.Plan{Decision: decide.Create, Steps: []decide.Step{
		{Kind: decide.StepCreate, Desired: decidetest.Desired(decidetest.URL), Key: "key-create", Secret: decide.SecretReturned},
		decidetest.ForgetStep("we_vanished"),
		decidetest.Stale(stale),
	}}
	out, _, err := h.run(p)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if want := []string{"Create key-create", "Delete we_0"}; !slices.Equal(h.provider.Order, want) {
		t.Errorf("provider calls %v; want %v", h.provider.Order, want)
	}
	st := h.secret()
	if out.kept.ID != "we_new1" || h.sub.Status.EndpointID != "we_new1" || st.Current != "we_new1" {
		t.Errorf("kept %q, status.endpointID %q, current %q; want the new registration we_new1 everywhere", out.kept.ID, h.sub.Status.EndpointID, st.Current)
	}
	if string(st.Secrets["we_new1"]) != "whsec_we_new1" {
		t.Errorf("the new registration's secret is not stored: %q", st.Secrets["we_new1"])
	}
	for _, gone := range []string{"we_vanished", "we_0"} {
		if _, ok := st.Secrets[gone]; ok {
			t.Errorf("the secret of %s (vanished or pruned) is still held", gone)
		}
	}
}

func TestExecuteStopsAtTheFirstError(t *testing.T) {
	ours := decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"))
	a, b := decidetest.Reg("we_2", 1), decidetest.Reg("we_3", 2)
	h := newExecHarness(t, ours, a, b)
	h.hold("we_1")
	h.provider.FailOn["Delete"] = &providers.Error{Kind: providers.Transient, Message: "502"}
	p := decidetest.Keeps(ours, decidetest.UpdateStep(ours, "events"), decidetest.Twin(a), decidetest.Twin(b))
	_, _, err := h.run(p)
	if err == nil {
		t.Fatal("execute succeeded although the first prune failed")
	}
	if want := []string{"Update we_1", "Delete we_2"}; !slices.Equal(h.provider.Order, want) {
		t.Errorf("provider calls %v; want %v (nothing after the failed delete)", h.provider.Order, want)
	}
	if h.sub.Status.EndpointID != "we_1" {
		t.Errorf("status.endpointID %q after a partial run; want the kept we_1, whose update went through", h.sub.Status.EndpointID)
	}
	if h.sub.Status.TwinsPruned != 0 {
		t.Errorf("twinsPruned %d; want 0: no twin was deleted", h.sub.Status.TwinsPruned)
	}
}

func TestExecuteRecordsWhatAPartialRunDid(t *testing.T) {
	t.Run("a create that the provider refuses records nothing", func(t *testing.T) {
		h := newExecHarness(t)
		h.sub.Status.EndpointID = "we_before"
		h.provider.FailOn["Create"] = &providers.Error{Kind: providers.Permanent, Message: "url_invalid"}
		_, _, err := h.run(decidetest.Creates())
		var se *decide.StallError
		if !errors.As(err, &se) || se.Reason != hookv1.ReasonProviderRejected {
			t.Errorf("error %v; want a ProviderRejected stall", err)
		}
		if h.sub.Status.EndpointID != "we_before" {
			t.Errorf("status.endpointID %q; want it unchanged", h.sub.Status.EndpointID)
		}
		if st := h.secret(); len(st.Secrets) != 0 {
			t.Errorf("the Secret holds %v after a refused create", st.Secrets)
		}
	})
	t.Run("a create whose secret cannot be stored reports the error and records nothing as current", func(t *testing.T) {
		h := newExecHarness(t)
		h.failSecretWrites = true
		p := decide.Plan{Decision: decide.Create, Steps: []decide.Step{{Kind: decide.StepCreate, Desired: decidetest.Desired(decidetest.URL), Key: "k", Secret: decide.SecretReturned}}}
		if _, _, err := h.run(p); err == nil {
			t.Fatal("execute succeeded although the secret could not be stored")
		}
		if h.sub.Status.EndpointID != "" {
			t.Errorf("status.endpointID %q; want none: the registration's secret is not held", h.sub.Status.EndpointID)
		}
	})
	t.Run("a create followed by a failed prune records the new registration, secret and current", func(t *testing.T) {
		stale := decidetest.Reg("we_0", 0, decidetest.WithURL(decidetest.OldURL))
		h := newExecHarness(t, stale)
		h.provider.FailOn["Delete"] = &providers.Error{Kind: providers.Unauthorized, Message: "insufficient scope"}
		p := decide.Plan{Decision: decide.Create, Steps: []decide.Step{{Kind: decide.StepCreate, Desired: decidetest.Desired(decidetest.URL), Key: "k", Secret: decide.SecretReturned}, decidetest.Stale(stale)}}
		if _, _, err := h.run(p); err == nil {
			t.Fatal("execute succeeded although the prune was refused")
		}
		st := h.secret()
		if h.sub.Status.EndpointID != "we_new1" || st.Current != "we_new1" || st.Secrets["we_new1"] == nil {
			t.Errorf("status.endpointID %q, current %q, held %v; want the created we_new1 recorded, current and held", h.sub.Status.EndpointID, st.Current, st.Held())
		}
	})
}

func TestExecuteEndsTheRoundOnAReplacement(t *testing.T) {
	ours := decidetest.Reg("we_1", 0, decidetest.WithEvents("invoice.paid"))
	h := newExecHarness(t, ours)
	h.hold("we_1")
	h.sub.Status.EndpointID = "we_1"
	p := decidetest.Keeps(ours, decide.Step{Kind: decide.StepReplace, Registration: ours, Desired: decidetest.Desired(decidetest.URL), Key: "key-rotate", Secret: decide.SecretReturned, Drift: []string{"events"}}, decidetest.MarkStep(ours))
	out, rs, err := h.run(p)
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if !out.replan || !rs.Retired["we_1"] {
		t.Errorf("outcome %+v, rounds %+v; want a new round with we_1 retired", out, rs)
	}
	if want := []string{"Create key-rotate"}; !slices.Equal(h.provider.Order, want) {
		t.Errorf("provider calls %v; want %v (no delete before the next round)", h.provider.Order, want)
	}
	st := h.secret()
	if st.Secrets["we_new1"] == nil || st.Current != "we_1" || h.sub.Status.EndpointID != "we_1" {
		t.Errorf("held %v, current %q, status.endpointID %q; want the replacement's secret held, we_1 still current and recorded", st.Held(), st.Current, h.sub.Status.EndpointID)
	}
}

func TestExecuteReplay(t *testing.T) {
	ours := decidetest.Reg("we_1", 0)
	replay := decide.Step{Kind: decide.StepReplay, Registration: ours, Desired: decide.OriginalCreate(ours), Key: ours.CreateKey}
	t.Run("the provider replays: secret stored, the round goes on", func(t *testing.T) {
		h := newExecHarness(t, ours)
		withSecret := ours
		withSecret.Secret = "whsec_original"
		h.provider.Replays = map[string]providers.Registration{ours.CreateKey: withSecret}
		out, rs, err := h.run(decidetest.Keeps(ours, replay, decidetest.MarkStep(ours)))
		if err != nil || out.replan || len(rs.Retired)+len(rs.ReplayRefused) > 0 {
			t.Fatalf("outcome %+v, rounds %+v, err %v; want the round to finish", out, rs, err)
		}
		if st := h.secret(); string(st.Secrets["we_1"]) != "whsec_original" || st.Current != "we_1" {
			t.Errorf("held %v current %q; want we_1's original secret, current", st.Held(), st.Current)
		}
	})
	t.Run("the window passed, the replay made a new registration: it replaces keep from the next round", func(t *testing.T) {
		h := newExecHarness(t, ours)
		out, rs, err := h.run(decidetest.Keeps(ours, replay, decidetest.MarkStep(ours)))
		if err != nil || !out.replan || !rs.Retired["we_1"] {
			t.Fatalf("outcome %+v, rounds %+v, err %v; want a new round with we_1 retired", out, rs, err)
		}
		if st := h.secret(); st.Secrets["we_new1"] == nil {
			t.Errorf("the new registration's secret is not held: %v", st.Held())
		}
		if h.provider.Calls["Create"] != 1 {
			t.Errorf("%d creates; want the one replay", h.provider.Calls["Create"])
		}
	})
	t.Run("the provider refuses the replay: the next round decides, nothing else is sent", func(t *testing.T) {
		h := newExecHarness(t, ours)
		h.provider.FailOn["Create"] = &providers.Error{Kind: providers.Permanent, Message: "Keys for idempotent requests can only be used with the same parameters"}
		out, rs, err := h.run(decidetest.Keeps(ours, replay, decidetest.UpdateStep(ours, "events"), decidetest.MarkStep(ours)))
		if err != nil || !out.replan || !rs.ReplayRefused["we_1"] {
			t.Fatalf("outcome %+v, rounds %+v, err %v; want a new round knowing the replay was refused", out, rs, err)
		}
		if want := []string{"Create " + ours.CreateKey}; !slices.Equal(h.provider.Order, want) {
			t.Errorf("provider calls %v; want %v", h.provider.Order, want)
		}
	})
	t.Run("the provider fails transiently: an error, and no round decided on it", func(t *testing.T) {
		h := newExecHarness(t, ours)
		h.provider.FailOn["Create"] = &providers.Error{Kind: providers.Transient, Message: "503"}
		_, rs, err := h.run(decidetest.Keeps(ours, replay))
		if err == nil || len(rs.ReplayRefused) > 0 {
			t.Errorf("err %v, rounds %+v; want the error and no refusal recorded", err, rs)
		}
	})
}

func TestExecuteConflictWaitsWithoutACall(t *testing.T) {
	h := newExecHarness(t, decidetest.Reg("we_x", 0, decidetest.WithOwner(decidetest.OtherSub)))
	_, _, err := h.run(decide.Plan{Decision: decide.Conflict, Conflict: "registration we_x belongs to shop/refunds"})
	var we *decide.WaitError
	if !errors.As(err, &we) || we.Reason != hookv1.ReasonConflict {
		t.Errorf("error %v; want a Conflict wait", err)
	}
	if len(h.provider.Order) != 0 {
		t.Errorf("provider calls %v on a conflict", h.provider.Order)
	}
}

func TestExecuteSetsAChosenSecretBeforeTheProviderHearsOfIt(t *testing.T) {
	ours := decidetest.Hook("1", 0)
	h := newExecHarness(t, ours)
	var pendingAtUpdate []byte
	// The pending secret must be in the Secret when the update is sent: read it from inside
	// the provider call.
	wrapped := &pendingProbe{FakeClient: h.provider, read: func() { pendingAtUpdate = h.secret().Pending }}
	o, _ := newTestAccount(t, wrapped)
	h.s.ops = o
	out, _, err := h.run(decidetest.Keeps(ours, decidetest.SetSecretStep(ours)))
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	st := h.secret()
	if len(pendingAtUpdate) == 0 {
		t.Errorf("no pending secret in the Secret when the provider was asked to use it")
	}
	if st.Pending != nil || string(st.Secrets["1"]) != string(pendingAtUpdate) || st.Current != "1" || out.kept.ID != "1" {
		t.Errorf("after the update: pending %q, held %q, current %q; want the pending secret confirmed under 1 and current", st.Pending, st.Secrets["1"], st.Current)
	}
}

// pendingProbe runs read before every Update.
type pendingProbe struct {
	*accounttest.FakeClient
	read func()
}

func (p *pendingProbe) Update(ctx context.Context, id string, d providers.Desired) (providers.Registration, error) {
	p.read()
	return p.FakeClient.Update(ctx, id, d)
}

// TestSecretWritesWaitUnderTheLock: while writes wait (as they do under the account's lock),
// a change to the signing Secret is in the session's view at once, and in the Secret before
// the provider's next request (ops.before); the changes after the last request are written by
// flush, all in one write, and a failed flush leaves the view at what the API server holds.
func TestSecretWritesWaitUnderTheLock(t *testing.T) {
	ctx := context.Background()
	stale := decidetest.Reg("we_0", 0, decidetest.WithURL(decidetest.OldURL))
	h := newExecHarness(t, stale)
	h.s.ops.Before, h.logSecretWrites = h.s.flush, true
	create := decide.Step{Kind: decide.StepCreate, Desired: decidetest.Desired(decidetest.URL), Key: "key-create", Secret: decide.SecretReturned}
	out, _, err := h.run(decide.Plan{Decision: decide.Create, Steps: []decide.Step{create, decidetest.Stale(stale)}})
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if want := []string{"Create key-create", "write Secret", "Delete we_0"}; !slices.Equal(h.provider.Order, want) {
		t.Fatalf("calls %v; want %v: the new secret written before the provider hears the next request", h.provider.Order, want)
	}
	if st := h.secret(); st.Current != out.kept.ID {
		t.Fatalf("the Secret's current secret is %q, want the new registration's %q", st.Current, out.kept.ID)
	}

	h = newExecHarness(t)
	h.s.ops.Before, h.logSecretWrites = h.s.flush, true
	out, _, err = h.run(decide.Plan{Decision: decide.Create, Steps: []decide.Step{create}})
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	if want := []string{"Create key-create"}; !slices.Equal(h.provider.Order, want) {
		t.Fatalf("calls %v; want %v: nothing written while the lock would be held", h.provider.Order, want)
	}
	if h.s.signing.Current != out.kept.ID || h.s.signing.Secrets[out.kept.ID] == nil {
		t.Fatalf("the session's view %+v does not hold the new registration %s's secret", h.s.signing, out.kept.ID)
	}
	if st := h.secret(); len(st.Secrets) != 0 {
		t.Fatalf("the Secret holds %v before the flush", st.Held())
	}
	if err := h.s.flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if want := []string{"Create key-create", "write Secret"}; !slices.Equal(h.provider.Order, want) {
		t.Fatalf("calls %v; want %v: one write for the changes waiting", h.provider.Order, want)
	}
	if st := h.secret(); st.Current != out.kept.ID || string(st.Secrets[out.kept.ID]) != "whsec_"+out.kept.ID {
		t.Fatalf("after the flush the Secret holds %+v, want %s's secret, current", st, out.kept.ID)
	}

	if err := h.s.markCurrent(ctx, "we_other"); err != nil {
		t.Fatal(err)
	}
	if err := h.s.storeSecret(ctx, "we_other", "whsec_other"); err != nil {
		t.Fatal(err)
	}
	h.failSecretWrites = true
	if err := h.s.flush(ctx); err == nil {
		t.Fatal("flush with the API server refusing writes returned no error")
	}
	if h.s.signing.Secrets["we_other"] != nil {
		t.Fatal("after a failed flush the view still holds a secret that was never written")
	}
}
