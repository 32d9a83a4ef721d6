package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/childproc"
	ghfake "github.com/hookwarden/hookwarden/providers/github/fake"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
	stripefake "github.com/hookwarden/hookwarden/providers/stripe/fake"
)

// The end-to-end recovery tests of issue 16: envtest's kube-apiserver, the receiver and manager
// binaries, the project's fakes over real HTTP and a sink. The fakes run in the test process so
// that the test can move their clocks and read their logs; everything else is a real process.

// recEnv is one control plane with a receiver, a manager, a sink and the fakes.
type recEnv struct {
	h           *chaosHarness
	root        *testing.T // the processes outlive each subtest
	managerBin  string
	receiverBin string
	bind, probe string // the receiver's delivery and probe addresses
	store       string
	receiver    *childproc.Proc
	manager     *childproc.Proc
	mgrStarts   int
	recStarts   int
	sink        *recSink
	// otel, when set, is the OTLP endpoint both binaries export their spans to from their next
	// start.
	otel string

	stripe       *stripefake.Server
	stripeURL    string
	stripeOffset atomic.Int64 // the fake Stripe's clock minus the wall clock, in ns

	github    *ghfake.Server
	githubURL string

	gitlab    *gitlab.Server
	gitlabURL string
	glMu      sync.Mutex
	glBase    time.Time // the fake GitLab's time at glStart
	glStart   time.Time // wall clock
	glSpeed   time.Duration
}

// setGitLabClock sets the fake GitLab's clock to at, running speed times as fast as the wall's.
func (e *recEnv) setGitLabClock(at time.Time, speed time.Duration) {
	e.glMu.Lock()
	defer e.glMu.Unlock()
	e.glBase, e.glStart, e.glSpeed = at, time.Now(), speed
}

func (e *recEnv) gitlabNow() time.Time {
	e.glMu.Lock()
	defer e.glMu.Unlock()
	return e.glBase.Add(time.Since(e.glStart) * e.glSpeed)
}

func newRecEnv(t *testing.T) *recEnv {
	ctrllog.SetLogger(logr.Discard())
	h := &chaosHarness{t: t, tmp: t.TempDir()}
	e := &recEnv{h: h, root: t, sink: newRecSink(t)}
	e.managerBin = h.build(".", "manager")
	e.receiverBin = h.build("../receiver", "receiver")
	h.startControlPlane()
	var err error
	if e.bind, err = childproc.FreeAddr(); err != nil {
		t.Fatal(err)
	}
	if e.probe, err = childproc.FreeAddr(); err != nil {
		t.Fatal(err)
	}
	e.store = "sqlite://" + filepath.Join(h.tmp, "receiver.db")

	e.stripe = stripefake.New(stripefake.WithClock(func() time.Time { return time.Now().Add(time.Duration(e.stripeOffset.Load())) }))
	var stop func()
	e.stripeURL, stop = e.stripe.Start()
	t.Cleanup(stop)
	e.github = ghfake.New(ghfake.WithDeliveries(&http.Client{Timeout: 5 * time.Second}))
	e.githubURL, stop = e.github.Start()
	t.Cleanup(stop)
	e.gitlab = gitlab.New()
	e.gitlab.AddProject("42", "group/project")
	e.setGitLabClock(time.Now(), 1)
	e.gitlab.Clock.Set(e.gitlabNow)
	e.gitlabURL, stop = e.gitlab.Start()
	t.Cleanup(stop)
	return e
}

func (e *recEnv) receiverURL() string { return "http://" + e.bind }

// startReceiver starts the receiver binary and waits until /readyz answers.
func (e *recEnv) startReceiver() {
	t := e.h.t
	t.Helper()
	e.recStarts++
	name := fmt.Sprintf("receiver-%d", e.recStarts)
	p, err := childproc.Start(name, filepath.Join(e.h.tmp, name+".log"), e.environ("receiver-under-test"), e.receiverBin,
		"serve", "--bind-address", e.bind, "--metrics-bind-address", "0", "--health-probe-bind-address", e.probe,
		"--store", e.store, "--namespace", chaosNamespace, "--receiver-namespace", chaosNamespace,
		"--retry-base", "50ms", "--retry-max", "500ms", "--lease", "3s", "--delivery-timeout", "2s", "--poll-interval", "50ms", "--shutdown-grace", "5s")
	if err != nil {
		t.Fatal(err)
	}
	e.root.Cleanup(func() { _, _ = p.Stop(10 * time.Second) })
	e.receiver = p
	c := &http.Client{Timeout: 2 * time.Second}
	e.h.eventually("the receiver ready", 60*time.Second, func(ctx context.Context) error {
		if err := p.Exited(); err != nil {
			return stopWaiting{err}
		}
		resp, err := c.Get("http://" + e.probe + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
}

// environ is a binary's environment: the control plane's kubeconfig and, with e.otel, the
// OTLP endpoint under service name service.
func (e *recEnv) environ(service string) []string {
	env := append(os.Environ(), "KUBECONFIG="+e.h.kubeconfig)
	if e.otel != "" {
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+e.otel, "OTEL_SERVICE_NAME="+service, "OTEL_BSP_SCHEDULE_DELAY=100")
	}
	return env
}

// stopReceiver SIGKILLs the receiver: its port refuses connections from then on.
// stopReceiver takes the receiver down as an outage does (scaled to zero, a rollout gone
// wrong): SIGTERM, and it records what its sinks acknowledged before it exits. A crash, where
// a sink may get an event again (at least once), is the receiver chaos tests' subject.
func (e *recEnv) stopReceiver() {
	how, err := e.receiver.Stop(10 * time.Second)
	if err != nil {
		e.h.t.Fatal(err)
	}
	if e.receiver.Killed() {
		e.h.t.Fatalf("the receiver %s", how)
	}
}

// startManager starts the manager binary (no leader election: one replica).
func (e *recEnv) startManager() {
	t := e.h.t
	t.Helper()
	probe, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	e.mgrStarts++
	name := fmt.Sprintf("manager-%d", e.mgrStarts)
	p, err := childproc.Start(name, filepath.Join(e.h.tmp, name+".log"), e.environ("manager-under-test"), e.managerBin,
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address="+probe,
		"--cluster-name=e2e", "--provider-timeout=5s", "--receiver-base-url="+e.receiverURL(), "--receiver-namespace="+chaosNamespace,
		"--zap-log-level=info")
	if err != nil {
		t.Fatal(err)
	}
	e.root.Cleanup(func() { _, _ = p.Stop(10 * time.Second) })
	e.manager = p
}

// subscription creates a subscription delivering through the bundled receiver to the sink.
func (e *recEnv) subscription(name string, provider hookv1.ProviderSpec, events []string, mode hookv1.RecoveryMode, lookback time.Duration) {
	e.subscriptionTo(name, provider, events, mode, lookback, &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: e.sink.url(name)}})
}

// subscriptionTo is subscription with the delivery given.
func (e *recEnv) subscriptionTo(name string, provider hookv1.ProviderSpec, events []string, mode hookv1.RecoveryMode, lookback time.Duration, delivery *hookv1.DeliverySpec) {
	t := e.h.t
	sub := &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: chaosNamespace, Name: name},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider:       provider,
			Endpoint:       hookv1.EndpointSpec{Receiver: &hookv1.ReceiverEndpoint{}, AllowInsecureHTTP: true},
			Events:         events,
			SigningSecret:  hookv1.SigningSecretSpec{Name: name + "-signing"},
			Delivery:       delivery,
			ResyncInterval: &metav1.Duration{Duration: 5 * time.Second},
			Recovery:       hookv1.RecoverySpec{Mode: mode, Lookback: &metav1.Duration{Duration: lookback}},
		},
	}
	if err := e.h.k8s.Create(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
}

func (e *recEnv) secret(name, key, value string) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: chaosNamespace, Name: name}, StringData: map[string]string{key: value}}
	if err := e.h.k8s.Create(context.Background(), sec); err != nil {
		e.h.t.Fatal(err)
	}
}

func (e *recEnv) get(ctx context.Context, name string) (*hookv1.WebhookSubscription, error) {
	var sub hookv1.WebhookSubscription
	err := e.h.k8s.Get(ctx, client.ObjectKey{Namespace: chaosNamespace, Name: name}, &sub)
	return &sub, err
}

func (e *recEnv) waitReady(name string) {
	e.h.eventually(name+" Ready", 2*time.Minute, func(ctx context.Context) error {
		if err := e.manager.Exited(); err != nil {
			return stopWaiting{err}
		}
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != sub.Generation {
			return fmt.Errorf("not Ready: %+v", c)
		}
		return nil
	})
}

// requestRecovery sets the recover-requested-at annotation and returns its value.
func (e *recEnv) requestRecovery(name string) string {
	v := time.Now().UTC().Format(time.RFC3339Nano)
	e.h.eventually("annotating "+name, 30*time.Second, func(ctx context.Context) error {
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		base := sub.DeepCopy()
		if sub.Annotations == nil {
			sub.Annotations = map[string]string{}
		}
		sub.Annotations[hookv1.AnnotationRecoverRequestedAt] = v
		return e.h.k8s.Patch(ctx, sub, client.MergeFrom(base))
	})
	return v
}

// waitHandled waits until the request v was handled by a run that ended.
func (e *recEnv) waitHandled(name, v string) *hookv1.RecoveryStatus {
	var st *hookv1.RecoveryStatus
	e.h.eventually(name+" handling the recovery request", 2*time.Minute, func(ctx context.Context) error {
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		st = sub.Status.Recovery
		if st == nil || st.LastHandledRequestedAt != v || st.LastRun == nil || st.LastRun.Result == hookv1.RecoveryRunning {
			return fmt.Errorf("request %s not handled yet: %+v", v, st)
		}
		return nil
	})
	return st
}

// --- the sink

// recSink counts the CloudEvents the receiver delivers, by subscription (the path) and ce-id.
type recSink struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]map[string]int
}

func newRecSink(t *testing.T) *recSink {
	s := &recSink{got: map[string]map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("ce-id")
		s.mu.Lock()
		if s.got[r.URL.Path] == nil {
			s.got[r.URL.Path] = map[string]int{}
		}
		s.got[r.URL.Path][id]++
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *recSink) url(sub string) string { return s.srv.URL + "/" + sub }

// counts returns a copy of the arrivals at sub's path.
func (s *recSink) counts(sub string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.got["/"+sub] {
		out[k] = v
	}
	return out
}

// tally compares the arrivals at sub with want: how many of want arrived, how many arrived
// more than once (any id), and which of want are missing.
func (s *recSink) tally(sub string, want []string) (arrived, twice int, missing []string) {
	got := s.counts(sub)
	for _, id := range want {
		if got[id] > 0 {
			arrived++
		} else {
			missing = append(missing, id)
		}
	}
	for _, n := range got {
		if n > 1 {
			twice++
		}
	}
	return arrived, twice, missing
}

// doubled returns the ids that arrived at sub more than once, sorted.
func (s *recSink) doubled(sub string) []string {
	var out []string
	for id, n := range s.counts(sub) {
		if n > 1 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// --- Stripe

const stripeDown = 4 * 24 * time.Hour

func stripeProvider(e *recEnv, secret string) hookv1.ProviderSpec {
	return hookv1.ProviderSpec{Type: hookv1.ProviderStripe, APIURL: e.stripeURL, CredentialsRef: hookv1.SecretKeySelector{Name: secret, Key: "apiKey"}}
}

// stripeOutage emits n events of the subscribed types over span while the receiver is down,
// the fake's clock running from span ago to now, with Stripe's retries made as they fall due.
// It returns the ids, oldest first.
func (e *recEnv) stripeOutage(key string, n int, span time.Duration) []string {
	e.stripeOffset.Store(int64(-span))
	var ids []string
	types := []string{"invoice.paid", "charge.failed"}
	for i := range n {
		ids = append(ids, e.stripe.Emit(key, types[i%2], map[string]any{"n": i}).ID)
		if span > 0 {
			e.stripeOffset.Add(int64(span / time.Duration(n)))
		}
		e.stripe.RetryDue()
	}
	e.stripeOffset.Store(0)
	return ids
}

// failedAtStripe counts the events of ids none of whose delivery attempts succeeded.
func (e *recEnv) failedAtStripe(ids []string) (failed, attempts int) {
	ok := map[string]bool{}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, a := range e.stripe.Attempts() {
		if want[a.Event] {
			attempts++
			ok[a.Event] = ok[a.Event] || a.OK
		}
	}
	for _, id := range ids {
		if !ok[id] {
			failed++
		}
	}
	return failed, attempts
}

// TestRecoveryEndToEnd is issue 16's end-to-end run against the manager and receiver binaries.
func TestRecoveryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a control plane, the manager and the receiver")
	}
	e := newRecEnv(t)
	e.startReceiver()
	e.startManager()

	t.Run("stripe four days down", func(t *testing.T) { e.h.t = t; stripeFourDaysDown(e) })
	t.Run("github four days down", func(t *testing.T) { e.h.t = t; githubFourDaysDown(e) })
	t.Run("gitlab four days down", func(t *testing.T) { e.h.t = t; gitlabFourDaysDown(e) })
	t.Run("stripe manager killed mid-recovery", func(t *testing.T) { e.h.t = t; stripeKilledMidRecovery(e) })
	t.Run("stripe rate-limit storm", func(t *testing.T) { e.h.t = t; stripeRateLimitStorm(e) })
	t.Run("stripe 1000 events in one second", func(t *testing.T) { e.h.t = t; stripeCrowdedSecond(e) })
	t.Run("stripe manager killed mid-page of one second", func(t *testing.T) { e.h.t = t; stripeKilledInACrowdedSecond(e) })
	t.Run("stripe endpoint disabled by Stripe", func(t *testing.T) { e.h.t = t; stripeDisabledByStripe(e) })
	t.Run("gitlab failures short of a disable", func(t *testing.T) { e.h.t = t; gitlabFailuresWithoutDisable(e) })
	t.Run("stripe recovered event traced to two sinks", func(t *testing.T) { e.h.t = t; stripeRecoveredTraced(e) })
	e.h.t = t
	e.h.checkLogs() // a data race (under -race) or a panic in any process's log fails the test
}

func stripeFourDaysDown(e *recEnv) {
	t := e.h.t
	const name, key = "stripe-down", "sk_test_recovery_down"
	e.secret("stripe-down-credentials", "apiKey", key)
	// Manual until the receiver is back: the fake's events are backdated to "four days ago" on
	// the manager's wall clock, so an automatic run before the outage would leave a watermark
	// after them (in real time it would lie before the outage).
	e.subscription(name, stripeProvider(e, "stripe-down-credentials"), []string{"invoice.paid", "charge.failed"}, hookv1.RecoveryManual, 7*24*time.Hour)
	e.waitReady(name)

	// A live event reaches the sink: the route is up.
	live := e.stripe.Emit(key, "invoice.paid", nil).ID
	e.h.eventually("the live event at the sink", time.Minute, func(context.Context) error {
		if e.sink.counts(name)[live] == 0 {
			return errors.New("not yet")
		}
		return nil
	})

	e.stopReceiver()
	ids := e.stripeOutage(key, 35, stripeDown)
	failed, attempts := e.failedAtStripe(ids)
	if failed != len(ids) {
		t.Fatalf("%d of %d events failed at the fake while the receiver was down (%d attempts)", failed, len(ids), attempts)
	}
	e.startReceiver()

	// An automatic run (Stripe: one look per resync) brings them back without being asked.
	e.setMode(name, hookv1.RecoveryAuto)
	e.h.eventually("every missed event at the sink", 2*time.Minute, func(ctx context.Context) error {
		if err := e.manager.Exited(); err != nil {
			return stopWaiting{err}
		}
		if n, _, missing := e.sink.tally(name, ids); n != len(ids) {
			return fmt.Errorf("%d of %d at the sink; missing %v", n, len(ids), missing[:min(3, len(missing))])
		}
		return nil
	})
	var auto *hookv1.RecoveryStatus
	e.h.eventually("an automatic run recorded", time.Minute, func(ctx context.Context) error {
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		auto = sub.Status.Recovery
		if auto == nil || auto.Recovered < int64(len(ids)) || auto.LastRun == nil || auto.LastRun.Result == hookv1.RecoveryRunning {
			return fmt.Errorf("status.recovery %+v", auto)
		}
		return nil
	})
	if auto.LastRun.Trigger != hookv1.TriggerAuto {
		t.Errorf("the run before any request was %s, want Auto", auto.LastRun.Trigger)
	}
	// Then a requested run: nothing left to recover, nothing doubled.
	st := e.waitHandled(name, e.requestRecovery(name))
	if st.LastRun.Trigger != hookv1.TriggerRequested || st.LastRun.Result != hookv1.RecoverySucceeded {
		t.Errorf("requested run: %+v, want a Requested run that succeeded", st.LastRun)
	}
	arrived, twice, _ := e.sink.tally(name, ids)
	fmt.Printf("REPORT recovery stripe four days down: sent %d, failed at the provider %d (%d attempts), recovered %d, beyond the window %d, delivered twice %d\n",
		len(ids), failed, attempts, st.Recovered, st.BeyondWindow, twice)
	if arrived != len(ids) || twice != 0 || st.BeyondWindow != 0 || st.Recovered != int64(len(ids)) {
		t.Errorf("arrived %d of %d, twice %d, status %+v: want every event once, recovered %d, none beyond Stripe's 30 days", arrived, len(ids), twice, st, len(ids))
	}
	if e.sink.counts(name)[live] != 1 {
		t.Errorf("the live event arrived %d times", e.sink.counts(name)[live])
	}
}

// waitAllOnce waits until every id of ids reached sub's sink path.
func (e *recEnv) waitAllOnce(name string, ids []string, timeout time.Duration) {
	e.h.eventually(fmt.Sprintf("%d events of %s at the sink", len(ids), name), timeout, func(ctx context.Context) error {
		if err := e.manager.Exited(); err != nil {
			return stopWaiting{err}
		}
		if n, _, missing := e.sink.tally(name, ids); n != len(ids) {
			var run any
			if sub, err := e.get(ctx, name); err == nil && sub.Status.Recovery != nil {
				run = sub.Status.Recovery.LastRun
			}
			return fmt.Errorf("%d of %d at the sink; missing %v; last run %+v", n, len(ids), missing[:min(3, len(missing))], run)
		}
		return nil
	})
}

// The manager is SIGKILLed while a fetch run hands several hundred events to the receiver; the
// restarted manager finishes the run from the persisted watermark and the receiver's ledger
// answers what it had committed already.
func stripeKilledMidRecovery(e *recEnv) {
	t := e.h.t
	const name, key, n = "stripe-crash", "sk_test_recovery_crash", 400
	e.secret("stripe-crash-credentials", "apiKey", key)
	e.subscription(name, stripeProvider(e, "stripe-crash-credentials"), []string{"invoice.paid", "charge.failed"}, hookv1.RecoveryManual, 72*time.Hour)
	e.waitReady(name)
	e.stopReceiver()
	ids := e.stripeOutage(key, n, time.Hour)
	e.startReceiver()
	req := e.requestRecovery(name)

	// Kill the manager once some, not all, have reached the sink (past the first page, whose
	// watermark is persisted).
	var before int
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	for range tick.C {
		before, _, _ = e.sink.tally(name, ids)
		if before >= 150 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery run started within 2m (%d at the sink)", before)
		}
	}
	tick.Stop()
	if err := e.manager.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill, _, _ := e.sink.tally(name, ids)
	sub, err := e.get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	persisted := sub.Status.Recovery.DeepCopy()
	if atKill >= n {
		t.Errorf("all %d events were handed over before the kill: the kill did not land mid-run", n)
	}
	e.startManager()
	e.waitAllOnce(name, ids, 3*time.Minute)
	st := e.waitHandled(name, req) // the restarted manager handles the request the killed one had not
	arrived, twice, _ := e.sink.tally(name, ids)
	var mark string
	if persisted != nil && persisted.Watermark != nil {
		mark = persisted.Watermark.UTC().Format(time.RFC3339)
	}
	fmt.Printf("REPORT recovery stripe manager SIGKILLed mid-recovery: sent %d, at the sink when killed %d (watermark then %q, last run %s), after restart recovered %d, skipped as already delivered %d, at the sink %d, delivered twice %d\n",
		n, atKill, mark, runResult(persisted), st.Recovered, st.Skipped, arrived, twice)
	if arrived != n || twice != 0 {
		t.Errorf("at the sink %d of %d, %d twice: want every event exactly once", arrived, n, twice)
	}
	if st.Recovered+st.Skipped < int64(n) {
		t.Errorf("status.recovery recovered %d + skipped %d < %d sent", st.Recovered, st.Skipped, n)
	}
}

func runResult(st *hookv1.RecoveryStatus) string {
	if st == nil || st.LastRun == nil {
		return "none"
	}
	return string(st.LastRun.Result)
}

// A rate-limit storm on /v1/events during a run: no request to the provider's events inside a
// stated Retry-After, and every event arrives once in the end.
func stripeRateLimitStorm(e *recEnv) {
	t := e.h.t
	const name, key, n = "stripe-storm", "sk_test_recovery_storm", 150
	const retryAfter = 3 * time.Second
	e.secret("stripe-storm-credentials", "apiKey", key)
	e.subscription(name, stripeProvider(e, "stripe-storm-credentials"), []string{"invoice.paid", "charge.failed"}, hookv1.RecoveryManual, 72*time.Hour)
	e.waitReady(name)
	e.stopReceiver()
	ids := e.stripeOutage(key, n, time.Hour)
	remove := e.stripe.Inject(stripefake.Fault{PathPrefix: "/v1/events", APIKey: key, Status: http.StatusTooManyRequests, Code: "rate_limit", RetryAfter: retryAfter, Times: 4})
	defer remove()
	e.startReceiver()
	// Auto: a run the limit stopped goes on at a later resync (a requested run in Manual mode
	// would not: the request counts as handled once the limited run ends).
	e.setMode(name, hookv1.RecoveryAuto)
	e.waitAllOnce(name, ids, 3*time.Minute)

	label := stripefake.AccountLabel(key)
	var limited, early, listed int
	var last time.Time // end of the last stated wait
	for _, r := range e.stripe.Requests() {
		if r.Account != label || r.Method != http.MethodGet || !strings.HasPrefix(r.Path, "/v1/events") {
			continue
		}
		listed++
		if r.Time.Before(last) {
			early++
			t.Errorf("GET %s at %s, inside the Retry-After stated until %s", r.Path, r.Time.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
		}
		if r.Status == http.StatusTooManyRequests {
			limited++
			last = r.Time.Add(retryAfter)
		}
	}
	arrived, twice, _ := e.sink.tally(name, ids)
	fmt.Printf("REPORT recovery stripe rate-limit storm: sent %d, /v1/events requests %d of which answered 429 (Retry-After %s) %d, requests inside a stated Retry-After %d, at the sink %d, delivered twice %d\n",
		n, listed, retryAfter, limited, early, arrived, twice)
	if limited != 4 {
		t.Errorf("%d requests answered 429, want the 4 injected", limited)
	}
	if arrived != n || twice != 0 {
		t.Errorf("at the sink %d of %d, %d twice", arrived, n, twice)
	}
}

// setMode sets spec.recovery.mode.
func (e *recEnv) setMode(name string, mode hookv1.RecoveryMode) {
	e.h.eventually("setting the recovery mode of "+name, 30*time.Second, func(ctx context.Context) error {
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		base := sub.DeepCopy()
		sub.Spec.Recovery.Mode = mode
		return e.h.k8s.Patch(ctx, sub, client.MergeFrom(base))
	})
}

// --- GitHub

// GitHub keeps a hook's deliveries and redelivers those of the last 3 days: of 35 events over
// four days, those older than that are reported, the rest come back once, under their guid.
func githubFourDaysDown(e *recEnv) {
	t := e.h.t
	const name, tok, target = "github-down", "ghp_recoverye2e0001", "repos/octo/recover"
	e.github.Grant(tok, target)
	e.secret("github-down-credentials", "token", tok)
	e.subscription(name, hookv1.ProviderSpec{Type: hookv1.ProviderGitHub, APIURL: e.githubURL,
		CredentialsRef: hookv1.SecretKeySelector{Name: "github-down-credentials", Key: "token"},
		GitHub:         &hookv1.GitHubTarget{Owner: "octo", Repository: "recover"}}, []string{"push"}, hookv1.RecoveryAuto, 7*24*time.Hour)
	e.waitReady(name)
	hooks := e.github.Hooks(target)
	if len(hooks) != 1 {
		t.Fatalf("%d hooks on %s, want 1", len(hooks), target)
	}
	live, err := e.github.Emit(target, "push", []byte(`{"ref":"refs/heads/main"}`))
	if err != nil || len(live) != 1 || live[0].Code/100 != 2 {
		t.Fatalf("the live delivery: %+v, %v", live, err)
	}

	e.stopReceiver()
	start := time.Now().Add(-stripeDown)
	var ids, inside, beyond []string
	failed := 0
	for i := range 35 {
		at := start.Add(time.Duration(i) * stripeDown / 35)
		ds, err := e.github.EmitAt(at, target, "push", []byte(fmt.Sprintf(`{"ref":"refs/heads/main","n":%d}`, i)))
		if err != nil || len(ds) != 1 {
			t.Fatalf("emitting: %+v, %v", ds, err)
		}
		ids = append(ids, ds[0].GUID)
		if ds[0].Code/100 != 2 {
			failed++
		}
		// A margin of a minute either side of the window's edge, for the time the run takes.
		switch age := time.Since(at); {
		case age < ghfake.RedeliveryWindow-time.Minute:
			inside = append(inside, ds[0].GUID)
		case age > ghfake.RedeliveryWindow+time.Minute:
			beyond = append(beyond, ds[0].GUID)
		default:
			t.Fatalf("event %d at the window's edge; the spacing should avoid that", i)
		}
	}
	e.startReceiver()

	// GitHub reports the failures (last_response): an automatic run redelivers.
	e.waitAllOnce(name, inside, 2*time.Minute)
	var st *hookv1.RecoveryStatus
	e.h.eventually("the automatic run recorded", time.Minute, func(ctx context.Context) error {
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		st = sub.Status.Recovery
		if st == nil || st.LastRun == nil || st.LastRun.Result == hookv1.RecoveryRunning || st.Recovered < int64(len(inside)) {
			return fmt.Errorf("status.recovery %+v", st)
		}
		return nil
	})
	if st.LastRun.Trigger != hookv1.TriggerAuto {
		t.Errorf("first run %s, want Auto", st.LastRun.Trigger)
	}
	msg := st.LastRun.Message
	// A requested run afterwards finds nothing more to send.
	st = e.waitHandled(name, e.requestRecovery(name))
	e.github.WaitDeliveries()
	got := e.sink.counts(name)
	arrivedBeyond := 0
	for _, id := range beyond {
		if got[id] > 0 {
			arrivedBeyond++
		}
	}
	arrived, twice, _ := e.sink.tally(name, inside)
	reported := st.BeyondWindow == int64(len(beyond)) && e.hasEvent(name, hookv1.ReasonBeyondRecoveryWindow)
	fmt.Printf("REPORT recovery github four days down: sent %d, failed at the provider %d, recovered %d, beyond the window %d (status beyondWindow %d; run message %q), delivered twice %d\n",
		len(ids), failed, arrived, len(beyond), st.BeyondWindow, msg, twice)
	if arrived != len(inside) || twice != 0 || arrivedBeyond != 0 || !reported {
		t.Errorf("inside the window %d of %d arrived, %d twice; beyond it %d arrived, reported %v (status beyondWindow %d, want %d, and a %s Event): want all once, none beyond, each beyond reported",
			arrived, len(inside), twice, arrivedBeyond, reported, st.BeyondWindow, len(beyond), hookv1.ReasonBeyondRecoveryWindow)
	}
	if st.Recovered != int64(len(inside)) {
		t.Errorf("status.recovery.recovered %d, want %d", st.Recovered, len(inside))
	}
}

// --- GitLab (REST profile)

// glSpeed is how much faster than the wall the fake GitLab's clock runs once the receiver is
// back, with the profile's resend rate scaled to match: GitLab's 5 resends a minute would
// otherwise make this run take minutes of real time.
const glSpeed = 10

// GitLab sends each event once, disables the hook after 4 failures in a row (for 1 minute,
// then twice as long after each further failure, up to a day) and never sends what happens
// meanwhile. Once the receiver is back (after the hook's disable has ended), every event
// GitLab sent and logged is resent once, with its Idempotency-Key.
func gitlabFourDaysDown(e *recEnv) {
	t := e.h.t
	const name, tok = "gitlab-down", "glpat-recoverye2e"
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "rest", "gitlab-project-hooks.profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const rate = "rate: {requests: 5, period: 1m}"
	if !strings.Contains(string(b), rate) {
		t.Fatalf("the GitLab profile no longer says %q", rate)
	}
	profile := strings.Replace(string(b), rate, fmt.Sprintf("rate: {requests: %d, period: 1m}", 5*glSpeed), 1)
	e.secret("gitlab-down-credentials", "token", tok)
	e.subscription(name, hookv1.ProviderSpec{Type: hookv1.ProviderREST, APIURL: e.gitlabURL + "/api/v4",
		CredentialsRef: hookv1.SecretKeySelector{Name: "gitlab-down-credentials", Key: "token"},
		REST:           &hookv1.RESTProvider{Profile: profile, Parameters: map[string]string{"project": "42"}}}, []string{"push"}, hookv1.RecoveryManual, 7*24*time.Hour)
	e.waitReady(name)
	if sent, _ := e.gitlab.Emit("42", "push_events", []byte(`{"object_kind":"push","live":true}`)); sent != 1 {
		t.Fatalf("the live event was sent to %d hooks", sent)
	}
	hooks := e.gitlab.Hooks("42")
	if len(hooks) != 1 {
		t.Fatalf("%d hooks, want 1", len(hooks))
	}
	hook := hooks[0].ID
	e.h.eventually("the live event at the sink", time.Minute, func(context.Context) error {
		if len(e.sink.counts(name)) == 0 {
			return errors.New("not yet")
		}
		return nil
	})

	e.stopReceiver()
	start := time.Now().Add(-stripeDown)
	logged := len(e.gitlab.Events("42", hook))
	sent, never := 0, 0
	for i := range 35 {
		e.setGitLabClock(start.Add(time.Duration(i)*stripeDown/35), 1)
		s, k := e.gitlab.Emit("42", "push_events", []byte(fmt.Sprintf(`{"object_kind":"push","n":%d}`, i)))
		sent, never = sent+s, never+k
	}
	var ids []string
	for _, ev := range e.gitlab.Events("42", hook)[logged:] {
		ids = append(ids, ev.IdempotencyKey())
	}
	if len(ids) != sent || never == 0 {
		t.Fatalf("logged %d, sent %d, never sent %d: want the hook disabled partway", len(ids), sent, never)
	}
	// Back once the hook's disable has ended (GitLab's profile has no way to end it early).
	back := time.Now()
	if h := e.gitlab.Hooks("42")[0]; h.DisabledUntil != nil && h.DisabledUntil.After(back) {
		back = h.DisabledUntil.Add(time.Second)
	}
	e.setGitLabClock(back, glSpeed)
	e.startReceiver()
	e.setMode(name, hookv1.RecoveryAuto)

	e.waitAllOnce(name, ids, 2*time.Minute)
	var st *hookv1.RecoveryStatus
	e.h.eventually("the automatic runs recorded", time.Minute, func(ctx context.Context) error {
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		st = sub.Status.Recovery
		if st == nil || st.LastRun == nil || st.LastRun.Result == hookv1.RecoveryRunning || st.Recovered < int64(len(ids)) {
			return fmt.Errorf("status.recovery %+v", st)
		}
		return nil
	})
	if st.LastRun.Trigger != hookv1.TriggerAuto {
		t.Errorf("last run %s, want Auto", st.LastRun.Trigger)
	}
	limited := 0
	for _, r := range e.gitlab.Requests() {
		if r.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	arrived, twice, _ := e.sink.tally(name, ids)
	var disabledGaps []string
	for _, g := range st.Gaps {
		if g.Reason == hookv1.GapProviderDisabled {
			disabledGaps = append(disabledGaps, g.Start.UTC().Format(time.RFC3339)+" to "+g.End.UTC().Format(time.RFC3339))
		}
	}
	fmt.Printf("REPORT recovery gitlab four days down: sent %d (never sent, hook auto-disabled: %d), failed at the provider %d, recovered %d, beyond the window %d, delivered twice %d, resends answered 429 %d, spans reported as never sent %v\n",
		35, never, sent, st.Recovered, st.BeyondWindow, twice, limited, disabledGaps)
	if arrived != len(ids) || twice != 0 || st.Recovered != int64(len(ids)) || st.BeyondWindow != 0 {
		t.Errorf("arrived %d of %d, twice %d %v, status %+v", arrived, len(ids), twice, e.sink.doubled(name), st)
	}
	// The events GitLab never sent while the hook was disabled are reported, not only known.
	if len(disabledGaps) == 0 || !e.hasEvent(name, hookv1.ReasonProviderDisabledGap) {
		t.Errorf("status.recovery.gaps %+v and no %s Event: the span GitLab had the hook disabled is not reported", st.Gaps, hookv1.ReasonProviderDisabledGap)
	}
}

// hasEvent reports whether the subscription name has a Kubernetes Event with reason.
func (e *recEnv) hasEvent(name, reason string) bool {
	var evs corev1.EventList
	if err := e.h.k8s.List(context.Background(), &evs, client.InNamespace(chaosNamespace)); err != nil {
		e.h.t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Name == name && ev.Reason == reason {
			return true
		}
	}
	return false
}

// stripeBurst emits n events of the subscribed types, all created in the one second of at, while
// the receiver is down; it returns their ids, in creation order.
func (e *recEnv) stripeBurst(key string, n int, at time.Time) []string {
	t := e.h.t
	at = at.Truncate(time.Second).Add(300 * time.Millisecond)
	var ids []string
	for i := range n {
		// Pin the fake's clock to the second: the emits take longer than a second of wall time.
		e.stripeOffset.Store(int64(time.Until(at.Add(time.Duration(i) * time.Millisecond / 2))))
		ids = append(ids, e.stripe.Emit(key, []string{"invoice.paid", "charge.failed"}[i%2], map[string]any{"n": i}).ID)
	}
	e.stripeOffset.Store(0)
	created := map[int64]int{}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, ev := range e.stripe.Events(key) {
		if want[ev.ID] {
			created[ev.Created.Unix()]++
		}
	}
	if len(created) != 1 {
		t.Fatalf("the burst's events were created in %d seconds (%v), want one", len(created), created)
	}
	return ids
}

// Issue 27: more than a page of missed Stripe events created in one second all come back once.
func stripeCrowdedSecond(e *recEnv) {
	t := e.h.t
	const name, key, n = "stripe-crowded", "sk_test_recovery_crowded", 1000
	e.secret("stripe-crowded-credentials", "apiKey", key)
	e.subscription(name, stripeProvider(e, "stripe-crowded-credentials"), []string{"invoice.paid", "charge.failed"}, hookv1.RecoveryManual, 72*time.Hour)
	e.waitReady(name)
	e.stopReceiver()
	ids := e.stripeBurst(key, n, time.Now().Add(-time.Hour))
	failed, _ := e.failedAtStripe(ids)
	e.startReceiver()
	e.setMode(name, hookv1.RecoveryAuto)
	e.waitAllOnce(name, ids, 4*time.Minute)
	var st *hookv1.RecoveryStatus
	e.h.eventually("the run recorded", time.Minute, func(ctx context.Context) error {
		sub, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		st = sub.Status.Recovery
		if st == nil || st.LastRun == nil || st.LastRun.Result == hookv1.RecoveryRunning || st.Recovered < n {
			return fmt.Errorf("status.recovery %+v", st)
		}
		return nil
	})
	arrived, twice, _ := e.sink.tally(name, ids)
	fmt.Printf("REPORT recovery stripe 1000 events in one second: sent %d, failed at the provider %d, recovered %d, at the sink %d, delivered twice %d, last run %s\n",
		n, failed, st.Recovered, arrived, twice, st.LastRun.Result)
	if arrived != n || twice != 0 || st.Recovered != n {
		t.Errorf("at the sink %d of %d, %d twice, recovered %d: want every event once", arrived, n, twice, st.Recovered)
	}
}

// Issue 27: the manager SIGKILLed partway through the page of one crowded second: after the
// restart every event of the second arrives, none twice.
func stripeKilledInACrowdedSecond(e *recEnv) {
	t := e.h.t
	const name, key, n = "stripe-crowded-crash", "sk_test_recovery_crowded_crash", 300
	e.secret("stripe-crowded-crash-credentials", "apiKey", key)
	e.subscription(name, stripeProvider(e, "stripe-crowded-crash-credentials"), []string{"invoice.paid", "charge.failed"}, hookv1.RecoveryManual, 72*time.Hour)
	e.waitReady(name)
	e.stopReceiver()
	ids := e.stripeBurst(key, n, time.Now().Add(-time.Hour))
	e.startReceiver()
	req := e.requestRecovery(name)
	// The kill must land while the run still hands events over: a few hundred go in well under
	// the harness's one-second poll on an idle machine, so this wait polls every 5 ms.
	deadline := time.Now().Add(2 * time.Minute)
	atKill, _, _ := e.sink.tally(name, ids)
	for ; atKill < 20; atKill, _, _ = e.sink.tally(name, ids) {
		if err := e.manager.Exited(); err != nil || time.Now().After(deadline) {
			t.Fatalf("%d events at the sink, want 20 before the kill (manager exited: %v)", atKill, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.manager.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill, _, _ = e.sink.tally(name, ids)
	e.startManager()
	e.waitAllOnce(name, ids, 3*time.Minute)
	st := e.waitHandled(name, req)
	arrived, twice, _ := e.sink.tally(name, ids)
	fmt.Printf("REPORT recovery stripe manager SIGKILLed mid-page of one second: sent %d, at the sink when killed %d, after restart recovered %d, skipped as already delivered %d, at the sink %d, delivered twice %d\n",
		n, atKill, st.Recovered, st.Skipped, arrived, twice)
	if atKill >= n {
		t.Errorf("all %d events were handed over before the kill: the kill did not land mid-page", n)
	}
	if arrived != n || twice != 0 {
		t.Errorf("at the sink %d of %d, %d twice: want every event exactly once", arrived, n, twice)
	}
}

// Issue 27: Stripe disables an endpoint whose deliveries keep failing. The manager shows
// DisabledByProvider and leaves it disabled while the receiver is still down; once the receiver
// answers it enables it (Reenabled Event) and the events created meanwhile, which Stripe never
// sent nor lists as undelivered, come back once; Delivering goes DisabledByProvider → Unknown.
func stripeDisabledByStripe(e *recEnv) {
	t := e.h.t
	const name, key = "stripe-disabled", "sk_test_recovery_disabled"
	e.secret("stripe-disabled-credentials", "apiKey", key)
	e.subscription(name, stripeProvider(e, "stripe-disabled-credentials"), []string{"invoice.paid", "charge.failed"}, hookv1.RecoveryAuto, 72*time.Hour)
	e.waitReady(name)
	eps := e.stripe.Endpoints(key)
	if len(eps) != 1 {
		t.Fatalf("%d endpoints, want 1", len(eps))
	}
	ep := eps[0].ID
	var transitions []string
	delivering := func(ctx context.Context) (*hookv1.WebhookSubscription, string) {
		sub, err := e.get(ctx, name)
		if err != nil {
			return nil, ""
		}
		reason := ""
		if c := meta.FindStatusCondition(sub.Status.Conditions, hookv1.ConditionDelivering); c != nil {
			reason = c.Reason
		}
		if len(transitions) == 0 || transitions[len(transitions)-1] != reason {
			transitions = append(transitions, reason)
		}
		return sub, reason
	}

	e.stopReceiver()
	var before, while []string
	for i := range 4 { // failed: pending, listed as undelivered
		before = append(before, e.stripe.Emit(key, "invoice.paid", map[string]any{"n": i}).ID)
	}
	e.stripe.Edit(key, ep, func(x *stripefake.Endpoint) { x.Status = "disabled" }) // as Stripe does after days of failures
	for i := range 4 {                                                             // never sent, never pending
		while = append(while, e.stripe.Emit(key, "charge.failed", map[string]any{"n": i}).ID)
	}
	// Found disabled; still disabled after two runs found the receiver unreachable.
	failedRuns := 0
	var lastStart time.Time
	e.h.eventually("DisabledByProvider and two runs that found the receiver unreachable", 2*time.Minute, func(ctx context.Context) error {
		sub, reason := delivering(ctx)
		if sub == nil || reason != hookv1.ReasonDisabledByProvider || sub.Status.Recovery == nil || sub.Status.Recovery.LastRun == nil {
			return fmt.Errorf("Delivering %q", reason)
		}
		if run := sub.Status.Recovery.LastRun; run.Result == hookv1.RecoveryFailed && strings.Contains(run.Message, "unreachable") && !run.StartTime.Time.Equal(lastStart) {
			failedRuns++
			lastStart = run.StartTime.Time
		}
		if failedRuns < 2 {
			return fmt.Errorf("%d failed runs so far", failedRuns)
		}
		return nil
	})
	if st := e.stripe.Endpoints(key)[0].Status; st != "disabled" || e.hasEvent(name, hookv1.ReasonReenabled) {
		t.Fatalf("endpoint %s, Reenabled Event %v while the receiver is down: want it left disabled", st, e.hasEvent(name, hookv1.ReasonReenabled))
	}

	e.startReceiver()
	all := append(slices.Clone(before), while...)
	e.waitAllOnce(name, all, 2*time.Minute)
	e.h.eventually("enabled again, Delivering no longer DisabledByProvider", time.Minute, func(ctx context.Context) error {
		_, reason := delivering(ctx)
		if st := e.stripe.Endpoints(key)[0].Status; st != "enabled" || !e.hasEvent(name, hookv1.ReasonReenabled) || (reason != hookv1.ReasonUnknown && reason != hookv1.ReasonHealthy) {
			return fmt.Errorf("endpoint %s, Delivering %q", st, reason)
		}
		return nil
	})
	arrived, twice, _ := e.sink.tally(name, all)
	fmt.Printf("REPORT recovery stripe endpoint disabled by Stripe: failed before the disable %d, created while disabled %d, at the sink %d, delivered twice %d, re-enabled while the receiver was down: no, Delivering %s\n",
		len(before), len(while), arrived, twice, strings.Join(transitions, " -> "))
	if arrived != len(all) || twice != 0 {
		t.Errorf("at the sink %d of %d, %d twice", arrived, len(all), twice)
	}
}

// Issue 27: GitLab sends each event once and says nothing of failures short of disabling the
// hook (it stays executable until its fourth failure in a row): three failed pushes come back by
// themselves in Auto, at the next resync's look.
func gitlabFailuresWithoutDisable(e *recEnv) {
	t := e.h.t
	const name, tok, project = "gitlab-few", "glpat-recoverfew", "43"
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "rest", "gitlab-project-hooks.profile.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e.setGitLabClock(time.Now(), 1)
	e.gitlab.AddProject(project, "group/few")
	e.secret("gitlab-few-credentials", "token", tok)
	e.subscription(name, hookv1.ProviderSpec{Type: hookv1.ProviderREST, APIURL: e.gitlabURL + "/api/v4",
		CredentialsRef: hookv1.SecretKeySelector{Name: "gitlab-few-credentials", Key: "token"},
		REST:           &hookv1.RESTProvider{Profile: string(b), Parameters: map[string]string{"project": project}}}, []string{"push"}, hookv1.RecoveryAuto, 72*time.Hour)
	e.waitReady(name)
	hooks := e.gitlab.Hooks(project)
	if len(hooks) != 1 {
		t.Fatalf("%d hooks, want 1", len(hooks))
	}
	e.stopReceiver()
	logged := len(e.gitlab.Events(project, hooks[0].ID))
	for i := range 3 {
		if sent, _ := e.gitlab.Emit(project, "push_events", []byte(fmt.Sprintf(`{"object_kind":"push","few":%d}`, i))); sent != 1 {
			t.Fatalf("push %d sent to %d hooks", i, sent)
		}
	}
	var ids []string
	for _, ev := range e.gitlab.Events(project, hooks[0].ID)[logged:] {
		if ev.ResponseStatus != "internal error" {
			t.Fatalf("a delivery to the stopped receiver was logged %q, want GitLab's \"internal error\"", ev.ResponseStatus)
		}
		ids = append(ids, ev.IdempotencyKey())
	}
	if h := e.gitlab.Hooks(project)[0]; h.DisabledUntil != nil || len(ids) != 3 {
		t.Fatalf("hook disabled until %v after %d failures: want it still executable", h.DisabledUntil, len(ids))
	}
	e.startReceiver()
	e.waitAllOnce(name, ids, 2*time.Minute)
	sub, err := e.get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	arrived, twice, _ := e.sink.tally(name, ids)
	var run any
	if sub.Status.Recovery != nil {
		run = sub.Status.Recovery.LastRun
	}
	fmt.Printf("REPORT recovery gitlab failures short of a disable: failed at the provider %d (hook still executable), recovered without a request %d, delivered twice %d, last run %+v\n",
		len(ids), arrived, twice, run)
	if arrived != len(ids) || twice != 0 {
		t.Errorf("at the sink %d of %d, %d twice", arrived, len(ids), twice)
	}
}
