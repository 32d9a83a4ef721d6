// Package controllers reconciles WebhookSubscriptions against provider accounts.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/telemetry"
	"github.com/hookwarden/hookwarden/providers"
)

// +kubebuilder:rbac:groups=hookwarden.io,resources=webhooksubscriptions,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hookwarden.io,resources=webhooksubscriptions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hookwarden.io,resources=webhooksubscriptions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=eventing.knative.dev,resources=brokers,verbs=get

// settingsIndex indexes subscriptions by the ConfigMap holding their provider settings (a REST
// profile), so an edited profile re-triggers only the subscriptions that use it.
const settingsIndex = "spec.provider.settingsConfigMap"

// credentialsIndex indexes subscriptions by the name of their credentials Secret, so a rotated
// or restored credential re-triggers only the subscriptions that use it.
const credentialsIndex = ".spec.provider.credentialsRef.name"

// sinkSecretsIndex indexes subscriptions by the Secrets their sinks read.
const sinkSecretsIndex = ".spec.delivery.sinks.secrets"

// Reconciler reconciles WebhookSubscriptions.
type Reconciler struct {
	client.Client
	// APIReader reads signing Secrets uncached: a stale read would look like a lost secret.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Accounts  *account.Accounts
	// ClusterName goes into the ownership marker, so clusters sharing an account never prune
	// each other's registrations.
	ClusterName string
	// ListTTL caps how long one provider list serves the other subscriptions on its account.
	ListTTL time.Duration
	// ReceiverBaseURL is the bundled receiver's public base URL, for spec.endpoint.receiver.
	ReceiverBaseURL string
	// OperationTimeout bounds the provider work of one reconcile, leaving time to write status.
	OperationTimeout time.Duration
	// OutageGrace is how long a registration last found good stays Ready while the provider
	// keeps failing (DefaultOutageGrace when zero).
	OutageGrace time.Duration
	// MaxConcurrentReconciles across accounts (one account is always serialized).
	MaxConcurrentReconciles int
	// AfterCreate, when set, runs after the provider answered a create and before anything is
	// written to the cluster. Tests use it to crash the manager in exactly that window.
	AfterCreate func(ctx context.Context, sub *hookv1.WebhookSubscription, reg providers.Registration) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Tracing writes a span per reconcile and per recovery run (nil or disabled: none). The
	// provider requests' spans are Accounts' (AccountOptions.Tracing, the same Tracing).
	Tracing *telemetry.Tracing
	// credentials (and REST profiles) are read from the API server, once per version of their
	// Secret (ConfigMap).
	credentials *account.Credentials
	// Metrics are the manager's series (subscription readiness here; the provider requests in
	// Accounts); nil: counted, never served.
	Metrics *Metrics
	// ownWrites keeps the manager's own signing-Secret writes from waking the subscription.
	ownWrites *ownWrites
	// signingMemo spares a resync the read of a signing Secret that has not changed.
	signingMemo *signingMemo
	// RouteSecrets, when set, copies signing material into the receiver's namespace.
	RouteSecrets *RouteSecrets
	// DeliveryClient sends recovered events to a registration's URL, and asks it whether it
	// answers, before a recovery run; nil: a client that follows no redirect.
	DeliveryClient *http.Client
	// health keeps the providers' reports of deliveries, asked once per resync interval.
	health healthMemo
	// Events bounds the Normal Events sent (DefaultEventBudget when zero; a negative
	// PerSecond sends them all).
	Events EventBudget
	// normalEvents is Events as a token bucket (nil: no budget).
	normalEvents *rate.Limiter
	// claims are the registrations this manager kept for each subscription (claims.go).
	claims claimBook
}

// DefaultMaxConcurrentReconciles is how many subscriptions are reconciled at once unless told
// otherwise. One account is serialized whatever it is, and each credential is paced at its
// provider's rate, so more workers do not raise provider load; they keep many accounts busy at
// once, where a reconcile mostly waits on the provider (tens to hundreds of milliseconds a
// create) and the API server. Measured with make bench-reconcile: 16 took the steady wave of
// 2,000 subscriptions on one account from 50.9 s (past its 40 s interval) to 12.9 s and the cold
// start of 2,000 over 100 accounts from 37.8 s to 31.7 s, and changed nothing where one
// account's provider rate bounds the cold start.
const DefaultMaxConcurrentReconciles = 16

// SetupWithManager registers the controller and its watches.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.ListTTL <= 0 {
		r.ListTTL = 30 * time.Second
	}
	if r.OperationTimeout <= 0 {
		r.OperationTimeout = 2 * time.Minute
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if r.Metrics == nil {
		r.Metrics = unregisteredMetrics()
	}
	r.normalEvents = r.Events.limiter()
	r.credentials = &account.Credentials{Meta: mgr.GetCache(), API: r.APIReader, Entries: map[account.CredentialKey]account.CredentialEntry{}}
	r.ownWrites = newOwnWrites()
	r.signingMemo = newSigningMemo(mgr.GetCache())
	if err := mgr.GetFieldIndexer().IndexField(ctx, &hookv1.WebhookSubscription{}, credentialsIndex, func(o client.Object) []string {
		return []string{o.(*hookv1.WebhookSubscription).Spec.Provider.CredentialsRef.Name}
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &hookv1.WebhookSubscription{}, sinkSecretsIndex, func(o client.Object) []string {
		return sinkSecretNames(o.(*hookv1.WebhookSubscription))
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &hookv1.WebhookSubscription{}, claimIndex, func(o client.Object) []string {
		return account.ClaimKeyOf(o.(*hookv1.WebhookSubscription), r.Accounts.Registry())
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &hookv1.WebhookSubscription{}, settingsIndex, func(o client.Object) []string {
		sub := o.(*hookv1.WebhookSubscription)
		if scope, err := decide.ProviderScope(&sub.Spec.Provider, sub.Spec.Events, r.Accounts.Registry()); err == nil && scope.SettingsRef != nil {
			return []string{scope.SettingsRef.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	// Secrets and ConfigMaps are watched by their metadata only (one informer each, shared by
	// the watches below): the manager never caches their content, and reads what it needs
	// from the API server (see CacheOptions).
	secrets := &metav1.PartialObjectMetadata{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	configMaps := &metav1.PartialObjectMetadata{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	return ctrl.NewControllerManagedBy(mgr).
		// Our own status patches must not wake the subscription again: after each wave's list
		// every subscription's lastSyncTime changes, and a reconcile per patch would re-list
		// whenever they outlast the shared list's age, a loop that never settles on a busy
		// machine. Spec changes (generation, which deletion also bumps) and annotations do; a
		// status edited by hand is repaired at the next resync.
		For(&hookv1.WebhookSubscription{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// A signing Secret edited or deleted by hand wakes its subscription (owner reference).
		Owns(&corev1.Secret{}, builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}, r.ownWrites.notOwn())).
		// ... and one whose event came while our own write of it was in flight (ownWrites.end).
		WatchesRawSource(source.Channel(r.ownWrites.wake, &handler.EnqueueRequestForObject{})).
		// A signing Secret `hookwarden import` wrote wakes the subscription it names while no
		// one owns it yet: a subscription applied before it waits for it (ImportedSecretWait).
		Watches(secrets, handler.EnqueueRequestsFromMapFunc(importedSecretFor), builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// A rotated or restored credential wakes the subscriptions naming it.
		Watches(secrets, handler.EnqueueRequestsFromMapFunc(r.subscriptionsUsing(credentialsIndex)), builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		// ... and so does one a sink reads (its copy in the route Secret follows).
		Watches(secrets, handler.EnqueueRequestsFromMapFunc(r.subscriptionsUsing(sinkSecretsIndex)), builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		Watches(configMaps, handler.EnqueueRequestsFromMapFunc(r.subscriptionsUsing(settingsIndex)), builder.OnlyMetadata, builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("webhooksubscription").
		Complete(r)
}

// subscriptionsUsing maps a Secret or ConfigMap to the subscriptions in its namespace that
// reference it through index.
func (r *Reconciler) subscriptionsUsing(index string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list hookv1.WebhookSubscriptionList
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "listing subscriptions that reference an object", "object", o.GetName(), "index", index)
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, s := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
		}
		return reqs
	}
}

// Reconcile is thin: fetch, finalize, suspend or reconcile, then one status patch; in a span
// of its own when tracing is on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, span := r.startReconcile(ctx, req)
	sub := &hookv1.WebhookSubscription{}
	res, err := r.reconcileSubscription(ctx, req, sub)
	endReconcile(span, sub, res, err)
	return res, err
}

func (r *Reconciler) reconcileSubscription(ctx context.Context, req ctrl.Request, sub *hookv1.WebhookSubscription) (ctrl.Result, error) {
	if err := r.Get(ctx, req.NamespacedName, sub); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.Namespace, req.Name)
			r.Metrics.forgetRecovery(req.Namespace, req.Name)
			r.health.forgetSubscription(req.Namespace + "/" + req.Name)
			r.Accounts.Release(req.Namespace + "/" + req.Name)
			r.claims.release(req.Namespace + "/" + req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sub.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, sub)
	}
	if err := r.ensureFinalizer(ctx, sub); err != nil {
		return ctrl.Result{}, err
	}
	base := sub.DeepCopy()
	// What `hookwarden plan` needs to plan as this manager does (written with the status, so
	// it costs no write of its own).
	sub.Status.Manager = &hookv1.ManagerSettings{ClusterName: r.ClusterName, ReceiverBaseURL: r.ReceiverBaseURL}
	// What the receiver needs for each sink, prepared before anything writes the route Secret.
	sinks := r.gatherSinks(ctx, sub)
	r.RouteSecrets.setSinks(req.NamespacedName, sinks.data)
	r.reportSinks(sub, sinks)
	var res ctrl.Result
	var err error
	if sub.Spec.Suspend {
		spanDecision(ctx, decisionSuspended)
		r.suspend(ctx, sub)
	} else {
		res, err = r.reconcileOnce(ctx, sub)
	}
	// A reconcile that changed nothing (a wake-up by a watch, a resync that reused the same
	// list) writes nothing: an empty patch is still a request.
	if equality.Semantic.DeepEqual(base.Status, sub.Status) {
		return res, err
	}
	if perr := r.Status().Patch(ctx, sub, client.MergeFrom(base)); perr != nil && !apierrors.IsNotFound(perr) {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return res, err
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, sub *hookv1.WebhookSubscription) error {
	if controllerutil.ContainsFinalizer(sub, hookv1.Finalizer) {
		return nil
	}
	patch := client.MergeFrom(sub.DeepCopy())
	controllerutil.AddFinalizer(sub, hookv1.Finalizer)
	return r.Patch(ctx, sub, patch)
}

// reconcileOnce runs one reconcile under the operation deadline and records its outcome. A
// reconcile requested through the annotation (reconcile.fluxcd.io/requestedAt) reads the
// provider afresh instead of reusing the account's shared list.
func (r *Reconciler) reconcileOnce(ctx context.Context, sub *hookv1.WebhookSubscription) (ctrl.Result, error) {
	requested := sub.Annotations[hookv1.AnnotationReconcileRequestedAt]
	if requested == sub.Status.LastHandledReconcileAt {
		requested = ""
	}
	opCtx, cancel := context.WithTimeout(ctx, r.OperationTimeout)
	defer cancel()
	res, target, err := r.reconcile(opCtx, sub, requested != "")
	if requested != "" {
		sub.Status.LastHandledReconcileAt = requested
	}
	synced := err == nil
	res, err = r.record(ctx, sub, res, err)
	if synced {
		// Recovery never changes what the reconcile recorded: its outcome is status.recovery,
		// the Delivering condition and, for a rate limit, an earlier requeue. It has a deadline
		// of its own.
		recCtx, cancel := context.WithTimeout(ctx, r.OperationTimeout)
		defer cancel()
		if wait := r.recoverMissed(recCtx, sub, target); wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
			res.RequeueAfter = wait
		}
	}
	return res, err
}

// suspend leaves the registration alone and says so in a status kstatus reads as Current:
// observedGeneration caught up, Ready True with reason Suspended, no Reconciling or Stalled.
// Ready False would not do: kstatus reads a False Ready as InProgress, and health checks
// (Flux, kubectl wait) would wait for a reconcile that does not come. The message keeps what
// was last known. A suspended subscription has no ready series (its alert would only say it
// was suspended on purpose).
func (r *Reconciler) suspend(ctx context.Context, sub *hookv1.WebhookSubscription) {
	sub.Status.ObservedGeneration = sub.Generation
	msg := "reconciliation is suspended (spec.suspend); the registration at the provider is left as it is"
	if id := sub.Status.EndpointID; id != "" {
		msg += " (last known: " + id + ")"
	} else {
		msg += " (none recorded)"
	}
	prev := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReady)
	if prev == nil || prev.Reason != hookv1.ReasonSuspended {
		if prev != nil {
			msg += "; before: " + prev.Reason + ": " + prev.Message
		}
		log.FromContext(ctx).Info("reconciliation suspended", logSubscription, account.SubscriptionKey(sub), logProvider, string(sub.Spec.Provider.Type), logEndpointID, sub.Status.EndpointID)
	} else {
		msg = prev.Message // unchanged while it stays suspended
	}
	setReady(sub, metav1.ConditionTrue, hookv1.ReasonSuspended, msg)
	meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionReconciling)
	meta.RemoveStatusCondition(&sub.Status.Conditions, hookv1.ConditionStalled)
	r.Metrics.forget(sub.Namespace, sub.Name)
	r.Metrics.forgetRecovery(sub.Namespace, sub.Name)
}

// session is one reconcile of one subscription while it holds its account's lock.
type session struct {
	r       *Reconciler
	sub     *hookv1.WebhookSubscription
	ops     account.Ops
	caps    providers.Capabilities
	desired providers.Desired
	// signing is what the signing Secret holds, kept in step with this session's own writes.
	signing account.SigningState
	// unwritten are the changes to the signing Secret waiting for the provider's next request
	// or the end of the reconcile (see mutate), to apply to signing.Obj.
	unwritten []func(*corev1.Secret)
	// rotate: a rotation of the signing secret was requested and not yet handled.
	rotate bool
}

// reconcile observes, plans and acts, in rounds: a round whose step changed which registration
// is kept (a replacement) ends early, and the next round plans again from the account's cached
// list, which holds our own writes. fresh skips the account's shared list.
func (r *Reconciler) reconcile(ctx context.Context, sub *hookv1.WebhookSubscription, fresh bool) (ctrl.Result, recoveryTarget, error) {
	var target recoveryTarget
	res, err := r.sync(ctx, sub, fresh, &target)
	return res, target, err
}

// sync is reconcile's observe-plan-act; target receives what a recovery run needs.
func (r *Reconciler) sync(ctx context.Context, sub *hookv1.WebhookSubscription, fresh bool, target *recoveryTarget) (_ ctrl.Result, err error) {
	ob, err := r.observe(ctx, sub)
	if err != nil {
		return ctrl.Result{}, err
	}
	desiredURL, ownReceiverURL, acct, rotate, s, unlock := ob.desiredURL, ob.ownReceiverURL, ob.acct, ob.rotate, ob.s, ob.unlock
	s.ops.Before = s.flush
	o := s.ops
	recorded, plans := sub.Status.EndpointID, newPlanTrace(ctx)
	defer func() {
		if err == nil || sub.Status.EndpointID != recorded {
			// Claimed before the account is unlocked: the next subscription to plan on it
			// sees the claim even before this status write reaches the cache.
			r.keptFor(sub, o.Scope(), sub.Status.EndpointID)
		}
		unlock()
		// The signing Secret changes made after the provider's last request, written outside
		// the lock; whatever the reconcile returns (a secret the provider returned before a
		// later failure is kept too).
		if ferr := s.flush(ctx); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}()
	if s.signing.Imported {
		if err := s.claimImported(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := s.describeVerifier(ctx); err != nil {
		return ctrl.Result{}, err
	}
	maxAge := r.listAge(sub, o.Epoch(), fresh)
	accepted, readsBefore := maxAge, o.Reads() // maxAge changes between rounds; the recovery look may be as old as this
	var rs decide.Rounds
	var kept providers.Registration
	providerDisabled := false
	refusedCreates := 0
	for round := 1; ; round++ {
		if round > decide.MaxRounds {
			return ctrl.Result{}, fmt.Errorf("the plan did not settle in %d rounds (last: %v)", decide.MaxRounds, rs)
		}
		observed, err := account.List(ctx, o, maxAge)
		if err != nil {
			return ctrl.Result{}, err
		}
		providerDisabled = providerDisabled || disabledByProvider(observed, sub.Status.EndpointID)
		in, err := s.claimedInput(ctx, s.planInput(observed, ownReceiverURL, rs))
		if err != nil {
			return ctrl.Result{}, err
		}
		p := plans.add(in, decide.ComputePlan(in))
		if after, ok := awaitsImportedSecret(p, sub, s.signing.Obj != nil, r.clock().Sub(sub.CreationTimestamp.Time)); ok {
			return ctrl.Result{}, decide.NewWait(hookv1.ReasonProgressing, after, "waiting up to %s from its creation for the signing Secret `hookwarden import` wrote for registration %s (apply it with the subscription) before getting the registration a new secret", ImportedSecretWait, p.Keep.ID)
		}
		s.reportUnfit(ctx, p)
		out, err := s.execute(ctx, p, &rs)
		if providers.KindOf(err) == providers.AlreadyExists {
			// The provider refused the create because a registration for this target exists
			// that the list did not show us (it changed meanwhile, or the list is partial): read
			// it again and plan once more; a second refusal needs a human.
			o.Invalidate()
			if refusedCreates++; refusedCreates == 1 {
				maxAge = 0
				continue
			}
			return ctrl.Result{}, decide.NewStallAtProvider(hookv1.ReasonConflict, "the provider refuses a new registration for %s because one exists, but no registration it lists serves this spec (%v); it may belong to an app or user this credential cannot see", desiredURL, err)
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		s.carriedOut(in, p, &rs)
		if !out.replan {
			s.r.reportSettled(sub, in, p, out.kept)
			kept = out.kept
			break
		}
		// Plan the next round from the cached list: it holds what this round wrote.
		maxAge = cachedList
	}
	if rotate != "" {
		// Handled: rotated, or nothing to rotate (a create made a new secret; unsigned).
		sub.Status.LastHandledRotateAt = rotate
	}
	sub.Status.URL = desiredURL
	sub.Status.LastDelivery = deliveryStatus(kept.LastDelivery)
	*target = recoveryTarget{acct: acct, listAge: accepted, kept: kept, secret: string(s.signing.Secrets[s.signing.Current]),
		providerDisabled: providerDisabled || disabledByProvider([]providers.Registration{kept}, kept.ID),
		listedNow:        o.Reads() != readsBefore}
	fetched := metav1.NewTime(o.FetchedAt())
	sub.Status.LastSyncTime = &fetched
	return ctrl.Result{RequeueAfter: r.nextResync(sub, o.Epoch())}, nil
}

// observation is what a reconcile, or a preview of one, plans from: the spec checked, the
// account reached, the signing Secret read and the rotation request confirmed, in a session
// that holds the account's lock until unlock.
type observation struct {
	desiredURL, ownReceiverURL string
	acct                       *account.Account
	// rotate is the rotation request not yet handled ("" for none).
	rotate string
	s      *session
	unlock func()
}

// observe is sync's prologue: the spec checked and the account reached (account.Observer, as
// the command line's preview observes), the signing Secret read and the rotation request
// confirmed, in a session that holds the account's lock until unlock.
func (r *Reconciler) observe(ctx context.Context, sub *hookv1.WebhookSubscription) (observation, error) {
	obs := r.observer()
	ob, err := obs.Observe(ctx, sub)
	if err != nil {
		return observation{}, err
	}
	signing, err := r.readSigningState(ctx, sub)
	if err != nil {
		return observation{}, err
	}
	rotate, err := obs.PendingRotation(ctx, sub, false)
	if err != nil {
		return observation{}, err
	}
	o, unlock := ob.Account.Lock()
	s := &session{r: r, sub: sub, ops: o, caps: o.Capabilities(), signing: signing, rotate: rotate != "", desired: ob.Desired}
	return observation{desiredURL: ob.Desired.URL, ownReceiverURL: ob.OwnReceiverURL, acct: ob.Account, rotate: rotate, s: s, unlock: unlock}, nil
}

// observer reaches accounts and reads the cluster as this reconciler is set up to.
func (r *Reconciler) observer() *account.Observer {
	return &account.Observer{Accounts: r.Accounts, Credentials: r.credentials, API: r.APIReader, ClusterName: r.ClusterName, ReceiverBaseURL: r.ReceiverBaseURL}
}

// cachedList is the list age that accepts the account's cached list whatever its age (unless a
// failed write invalidated it).
const cachedList = time.Duration(1<<63 - 1)

// planInput is what this session plans from, for one round.
func (s *session) planInput(observed []providers.Registration, ownReceiverURL string, rs decide.Rounds) decide.PlanInput {
	return account.Planned{Sub: s.sub, Desired: s.desired, Signing: s.signing, OwnReceiverURL: ownReceiverURL, Rotate: s.rotate}.Input(s.ops, observed, rs)
}

// carriedOut records what a round's plan, carried out, did: an adoption (an Event, so the
// user can read that a registration not proven ours was taken) and a rotation (in rs).
func (s *session) carriedOut(in decide.PlanInput, p decide.Plan, rs *decide.Rounds) {
	if p.Adopts(in) {
		s.r.event(s.sub, corev1.EventTypeNormal, hookv1.ReasonAdopted, "Adopt", "adopted %s, which serves %s without this subscription's ownership marker (policies.adoption is Adopt)", p.Keep.ID, p.Keep.URL)
	}
	if p.Rotates() {
		rs.Rotated = true
	}
}
