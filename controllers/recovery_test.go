package controllers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hookwarden/hookwarden/account"
	"github.com/hookwarden/hookwarden/account/accounttest"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/decide/decidetest"
	"github.com/hookwarden/hookwarden/providers"
)

// The recovery runner against an in-memory provider that implements every recovery interface
// (which one a run uses follows its capabilities) and a receiver that answers as the bundled
// one does: 202 accepted, 200 duplicate, an error.

type fakeRecoverer struct {
	*accounttest.FakeClient
	mu sync.Mutex
	// log is what the provider reports missed, oldest first; pageCap caps a page.
	log []providers.Missed
	// unlisted are events the provider never counted as undelivered (created while it had the
	// endpoint disabled): only Events lists them, beside log.
	unlisted  []providers.Missed
	events    []time.Time
	malformed int
	pageCap   int
	// covers is what Missed says its log covers (MissedPage.Covers; zero: everything).
	covers time.Time
	// listed counts Missed calls, with the since each was asked from.
	listed []time.Time
	// redelivered are the ids asked for, in order; redeliverErr answers one id with an error.
	redelivered  []string
	redeliverErr map[string]error
	rangeSince   []time.Time
	report       *providers.DeliveryHealth
	healthCalls  int
	reenabled    int
}

var (
	_ providers.Recoverer      = (*fakeRecoverer)(nil)
	_ providers.RangeRecoverer = (*fakeRecoverer)(nil)
	_ providers.HealthReporter = (*fakeRecoverer)(nil)
	_ providers.Reenabler      = (*fakeRecoverer)(nil)
	_ providers.DeliverySigner = (*fakeRecoverer)(nil)
	_ providers.EventLister    = (*fakeRecoverer)(nil)
)

func newFakeRecoverer(rc providers.RecoveryCapabilities, log ...providers.Missed) *fakeRecoverer {
	f := &fakeRecoverer{FakeClient: accounttest.NewFakeClient(), log: log, redeliverErr: map[string]error{}}
	f.Caps.Recovery = rc
	return f
}

func (f *fakeRecoverer) Missed(_ context.Context, _ providers.Registration, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listed = append(f.listed, since)
	if err := f.Fail("Missed"); err != nil {
		return providers.MissedPage{}, err
	}
	if f.pageCap > 0 && (limit == 0 || limit > f.pageCap) {
		limit = f.pageCap
	}
	page := listedPage(f.log, events, since, limit)
	page.Malformed, page.Covers = f.malformed, f.covers
	return page, nil
}

func (f *fakeRecoverer) Events(_ context.Context, events []string, since time.Time, limit int) (providers.MissedPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, since)
	all := slices.SortedStableFunc(slices.Values(append(slices.Clone(f.log), f.unlisted...)), func(a, b providers.Missed) int { return a.At.Compare(b.At) })
	return listedPage(all, events, since, limit), nil
}

// listedPage is the page of log (oldest first) a provider lists: the entries of the given types
// at or after since, cut at limit as providers cut (providers.CutMissed: whole seconds).
func listedPage(log []providers.Missed, events []string, since time.Time, limit int) providers.MissedPage {
	var page providers.MissedPage
	for _, m := range log {
		if !m.At.Before(since) && (slices.Contains(events, "*") || slices.Contains(events, m.Type)) {
			page.Missed = append(page.Missed, m)
		}
	}
	page.Missed, page.More = providers.CutMissed(page.Missed, limit)
	return page
}

func (f *fakeRecoverer) Redeliver(_ context.Context, _ providers.Registration, m providers.Missed) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redelivered = append(f.redelivered, m.ID)
	if err, ok := f.redeliverErr[m.ID]; ok {
		delete(f.redeliverErr, m.ID)
		return err
	}
	return nil
}

func (f *fakeRecoverer) RecoverSince(_ context.Context, _ providers.Registration, since time.Time) error {
	f.rangeSince = append(f.rangeSince, since)
	return nil
}

func (f *fakeRecoverer) Health(context.Context, providers.Registration) (providers.DeliveryHealth, error) {
	f.healthCalls++
	if f.report == nil {
		return providers.DeliveryHealth{}, nil
	}
	return *f.report, nil
}

func (f *fakeRecoverer) Reenable(context.Context, providers.Registration) error {
	f.reenabled++
	f.Order = append(f.Order, "Reenable")
	return nil
}

// SignDelivery signs as a provider would: an HMAC of the payload with the secret.
func (f *fakeRecoverer) SignDelivery(payload []byte, secret string, _ time.Time) (http.Header, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Test-Signature", testSignature(payload, secret))
	return h, nil
}

func testSignature(payload []byte, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(payload)
	return hex.EncodeToString(m.Sum(nil))
}

// testReceiver answers deliveries as the bundled receiver does: a bad signature 401, a
// committed id 200 (duplicate), a new one 202; fail answers the given id with a status.
type testReceiver struct {
	mu       sync.Mutex
	secret   string
	ledger   map[string]bool
	received []string
	fail     map[string]int
	probe    int // status of a GET (0: 405, as a POST-only route)
	// onDelivery, when set, runs before a delivery is answered.
	onDelivery func(id string)
}

func (rc *testReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rc.mu.Lock()
	if req.Method == http.MethodGet {
		code := rc.probe
		rc.mu.Unlock()
		if code == 0 {
			code = http.StatusMethodNotAllowed
		}
		w.WriteHeader(code)
		return
	}
	body, _ := io.ReadAll(req.Body)
	var ev struct{ ID string }
	_ = json.Unmarshal(body, &ev)
	hook := rc.onDelivery
	rc.mu.Unlock()
	if hook != nil {
		hook(ev.ID)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.received = append(rc.received, ev.ID)
	switch {
	case req.Header.Get("Test-Signature") != testSignature(body, rc.secret):
		w.WriteHeader(http.StatusUnauthorized)
	case rc.fail[ev.ID] != 0:
		w.WriteHeader(rc.fail[ev.ID])
	case rc.ledger[ev.ID]:
		w.WriteHeader(http.StatusOK)
	default:
		rc.ledger[ev.ID] = true
		w.WriteHeader(http.StatusAccepted)
	}
}

type recHarness struct {
	t        *testing.T
	provider *fakeRecoverer
	receiver *testReceiver
	kube     client.Client
	sub      *hookv1.WebhookSubscription
	r        *Reconciler
	acct     *account.Account
	clock    *accounttest.Clock
	reg      providers.Registration
	metrics  *prometheus.Registry
	recorder *events.FakeRecorder
}

const recSecret = "whsec_recovery_test"

func newRecHarness(t *testing.T, f *fakeRecoverer) *recHarness {
	t.Helper()
	return newRecHarnessWith(t, f, f)
}

// newRecHarnessWith is newRecHarness whose account reaches the provider through client.
func newRecHarnessWith(t *testing.T, f *fakeRecoverer, client providers.Client) *recHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := hookv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rc := &testReceiver{secret: recSecret, ledger: map[string]bool{}, fail: map[string]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	h := &recHarness{t: t, provider: f, receiver: rc, metrics: prometheus.NewRegistry(), recorder: events.NewFakeRecorder(100)}
	h.sub = &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", UID: "uid-orders", Generation: 1},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider:       hookv1.ProviderSpec{Type: hookv1.ProviderStripe},
			Events:         []string{"invoice.paid"},
			Endpoint:       hookv1.EndpointSpec{URL: srv.URL + "/hooks/shop/orders"},
			ResyncInterval: &metav1.Duration{Duration: 10 * time.Minute},
			Recovery:       hookv1.RecoverySpec{Mode: hookv1.RecoveryAuto},
		},
	}
	h.kube = fake.NewClientBuilder().WithScheme(scheme).WithObjects(h.sub.DeepCopy()).WithStatusSubresource(&hookv1.WebhookSubscription{}).Build()
	h.acct, h.clock = newTestAccountOf(t, client)
	m, err := NewMetrics(h.metrics)
	if err != nil {
		t.Fatal(err)
	}
	h.r = &Reconciler{Client: h.kube, APIReader: h.kube, Recorder: h.recorder, Metrics: m, Now: h.clock.Now}
	h.reg = providers.Registration{ID: "we_1", URL: h.sub.Spec.Endpoint.URL, Events: h.sub.Spec.Events}
	return h
}

// recover runs the recovery step as a reconcile that found the registration in step does.
func (h *recHarness) recover() time.Duration {
	h.t.Helper()
	return h.r.recoverMissed(context.Background(), h.sub, recoveryTarget{acct: h.acct, kept: h.reg, secret: recSecret, listedNow: true})
}

// stored is status.recovery as the API server holds it.
func (h *recHarness) stored() *hookv1.RecoveryStatus {
	h.t.Helper()
	got := &hookv1.WebhookSubscription{}
	if err := h.kube.Get(context.Background(), client.ObjectKeyFromObject(h.sub), got); err != nil {
		h.t.Fatal(err)
	}
	return got.Status.Recovery
}

func (h *recHarness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *recHarness) counter(outcome string) float64 {
	return metricValue(h.t, h.r.Metrics.recoveryEvents.WithLabelValues("shop", "orders", "stripe", outcome))
}

func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func missedAt(id string, minutesAgo int, typ string) providers.Missed {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(-time.Duration(minutesAgo) * time.Minute)
	return providers.Missed{ID: id, At: at, Type: typ, Payload: []byte(`{"id":"` + id + `","type":"` + typ + `"}`)}
}

func runCounts(run *hookv1.RecoveryRun) [4]int64 {
	return [4]int64{run.Recovered, run.Skipped, run.BeyondWindow, run.Malformed}
}

func TestRecoveryFetchStopsAtAFailureAndGoesOnFromTheWatermark(t *testing.T) {
	e1, e2, e3, e4 := missedAt("evt_1", 40, "invoice.paid"), missedAt("evt_2", 30, "invoice.paid"), missedAt("evt_3", 20, "invoice.paid"), missedAt("evt_4", 10, "invoice.paid")
	other := missedAt("evt_other", 25, "charge.refunded") // failed at another endpoint of the account
	f := newFakeRecoverer(decidetest.FetchCaps, e1, e2, other, e3, e4)
	f.pageCap = 2
	h := newRecHarness(t, f)
	h.receiver.ledger["evt_2"] = true // arrived after all: the receiver answers a duplicate
	h.receiver.fail["evt_3"] = http.StatusServiceUnavailable
	// When evt_3 is handed over, the first page's progress must already be on the API server:
	// a manager killed now loses nothing.
	var atEvt3 *hookv1.RecoveryStatus
	h.receiver.onDelivery = func(id string) {
		if id == "evt_3" && atEvt3 == nil {
			atEvt3 = h.stored()
		}
	}

	h.recover()
	run := h.sub.Status.Recovery.LastRun
	if run.Result != hookv1.RecoveryPartial || run.Trigger != hookv1.TriggerAuto {
		t.Fatalf("run %s (%s), want Partial Auto: %s", run.Result, run.Trigger, run.Message)
	}
	if diff := cmp.Diff([4]int64{1, 1, 0, 0}, runCounts(run)); diff != "" {
		t.Errorf("recovered, skipped, beyond, malformed (-want +got):\n%s", diff)
	}
	if got := h.sub.Status.Recovery.Watermark.Time; !got.Equal(e2.At) {
		t.Errorf("watermark %s, want the last event committed (evt_2, %s)", got, e2.At)
	}
	if atEvt3 == nil || atEvt3.Watermark == nil || !atEvt3.Watermark.Time.Equal(e2.At) || atEvt3.LastRun.Result != hookv1.RecoveryRunning {
		t.Errorf("when evt_3 was handed over, the API server held %+v; want watermark evt_2 and the run Running", atEvt3)
	}
	if diff := cmp.Diff([]string{"evt_1", "evt_2", "evt_3"}, h.receiver.received); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	if !strings.Contains(run.Message, "503") || !strings.Contains(run.Message, "evt_3") {
		t.Errorf("message %q does not say which event and answer stopped the run", run.Message)
	}

	// The receiver is well again; the next resync's run starts from the watermark: evt_2 again
	// (a duplicate, nothing doubled at the sink), then evt_3 and evt_4.
	delete(h.receiver.fail, "evt_3")
	h.receiver.received = nil
	h.clock.Advance(10 * time.Minute)
	h.recover()
	run = h.sub.Status.Recovery.LastRun
	if run.Result != hookv1.RecoverySucceeded {
		t.Fatalf("second run %s: %s", run.Result, run.Message)
	}
	if diff := cmp.Diff([]string{"evt_2", "evt_3", "evt_4"}, h.receiver.received); diff != "" {
		t.Errorf("second run received (-want +got):\n%s", diff)
	}
	st := h.stored()
	if st.Recovered != 3 || st.Skipped != 2 || !st.Watermark.Time.Equal(run.StartTime.Time) {
		t.Errorf("stored totals recovered %d skipped %d watermark %s; want 3, 2 and the run's start %s", st.Recovered, st.Skipped, st.Watermark, run.StartTime)
	}
	if got := f.listed[len(f.listed)-2]; !got.Equal(e2.At) {
		t.Errorf("the second run listed from %s, want the watermark %s", got, e2.At)
	}
	if h.counter("recovered") != 3 || h.counter("skipped") != 2 {
		t.Errorf("recovered %v skipped %v counted", h.counter("recovered"), h.counter("skipped"))
	}
	evs := strings.Join(h.events(), "\n")
	if !strings.Contains(evs, hookv1.ReasonRecoveryFailed) || !strings.Contains(evs, hookv1.ReasonRecoveryCompleted+" recovered 2, skipped 1") {
		t.Errorf("events:\n%s", evs)
	}
}

// A busy Stripe account creates far more events in one second than a page holds (issue 27):
// every event of the crowded second and of the seconds after it reaches the receiver once, and
// a run stopped partway through the crowded second goes on from that second.
func TestRecoveryFetchCrowdedSecond(t *testing.T) {
	var log, want []providers.Missed
	crowded := missedAt("evt_first", 30, "invoice.paid").At
	for i := range 250 {
		m := missedAt(fmt.Sprintf("evt_c%03d", i), 30, "invoice.paid")
		m.At = crowded
		log = append(log, m)
	}
	for i := range 10 {
		log = append(log, missedAt(fmt.Sprintf("evt_l%02d", i), 20-i, "invoice.paid"))
	}
	want = slices.Clone(log)
	f := newFakeRecoverer(decidetest.FetchCaps, log...)
	f.pageCap = 100
	h := newRecHarness(t, f)
	h.receiver.fail["evt_c080"] = http.StatusServiceUnavailable // as if the manager died at the 81st

	h.recover()
	run := h.sub.Status.Recovery.LastRun
	if run.Result != hookv1.RecoveryPartial || run.Recovered != 80 {
		t.Fatalf("first run %s, recovered %d: %s; want Partial after 80", run.Result, run.Recovered, run.Message)
	}
	if got := h.stored().Watermark.Time; !got.Equal(crowded) {
		t.Errorf("watermark %s, want the crowded second %s (its other events are still to come)", got, crowded)
	}

	delete(h.receiver.fail, "evt_c080")
	h.clock.Advance(10 * time.Minute)
	h.recover()
	run = h.sub.Status.Recovery.LastRun
	if run.Result != hookv1.RecoverySucceeded || run.Recovered != 180 || run.Skipped != 80 {
		t.Fatalf("second run %s, recovered %d, skipped %d: %s; want Succeeded, 180 recovered, the 80 already committed skipped", run.Result, run.Recovered, run.Skipped, run.Message)
	}
	for _, m := range want {
		if !h.receiver.ledger[m.ID] {
			t.Errorf("%s never reached the receiver", m.ID)
		}
	}
	if st := h.stored(); st.Recovered != int64(len(want)) {
		t.Errorf("status.recovery.recovered %d, want %d", st.Recovered, len(want))
	}
}

func TestRecoveryFetchListsEverythingWhileTheProviderHadTheEndpointDisabled(t *testing.T) {
	before := missedAt("evt_before", 40, "invoice.paid")                                                        // failed before the disable: listed as undelivered
	during1, during2 := missedAt("evt_during1", 20, "invoice.paid"), missedAt("evt_during2", 5, "invoice.paid") // never sent: not listed as undelivered
	f := newFakeRecoverer(decidetest.FetchCaps, before)
	f.unlisted = []providers.Missed{during1, during2}
	h := newRecHarness(t, f)
	h.reg.Health = &providers.DeliveryHealth{State: providers.HealthDisabled}
	// The watermark stayed 30 minutes back (the receiver was unreachable, or the manager down):
	// the events of that span the provider never sent must come back.
	mark := metav1.NewTime(h.clock.Now().Add(-30 * time.Minute))
	h.sub.Status.Recovery = &hookv1.RecoveryStatus{Watermark: &mark}
	h.r.recoverMissed(context.Background(), h.sub, recoveryTarget{acct: h.acct, kept: h.reg, secret: recSecret, providerDisabled: true})
	run := h.sub.Status.Recovery.LastRun
	if run == nil || run.Result != hookv1.RecoverySucceeded {
		t.Fatalf("run %+v, want Succeeded", run)
	}
	if diff := cmp.Diff([]string{"evt_during1", "evt_during2"}, h.receiver.received); diff != "" {
		t.Errorf("received (-want +got):\n%s\nreason: while the endpoint was disabled the provider sent nothing and lists nothing as undelivered: every event since the watermark is handed over", diff)
	}
	if len(f.events) != 1 || !f.events[0].Equal(mark.Time) || len(f.listed) != 0 {
		t.Errorf("Events asked from %v, Missed from %v; want Events once from the watermark (%s), Missed never", f.events, f.listed, mark.Time)
	}
	if h.stored().ProviderDisabledAt != nil {
		t.Errorf("providerDisabledAt %s kept after a run that handed everything over", h.stored().ProviderDisabledAt)
	}
	// The endpoint is enabled again: the next run lists undelivered events only.
	h.reg.Health = nil
	h.clock.Advance(10 * time.Minute)
	h.recover()
	if len(f.listed) != 1 || len(f.events) != 1 {
		t.Errorf("after the run: Missed %d times, Events %d times; want the undelivered listing again", len(f.listed), len(f.events))
	}
}

func TestRecoveryFetchCountsExpiredAndMalformed(t *testing.T) {
	old := missedAt("evt_old", 50, "invoice.paid")
	old.Expired = true
	f := newFakeRecoverer(decidetest.FetchCaps, old, missedAt("evt_1", 10, "invoice.paid"))
	f.malformed = 2
	h := newRecHarness(t, f)
	h.recover()
	run := h.sub.Status.Recovery.LastRun
	if diff := cmp.Diff([4]int64{1, 0, 1, 2}, runCounts(run)); diff != "" {
		t.Errorf("recovered, skipped, beyond, malformed (-want +got):\n%s", diff)
	}
	if slices.Contains(h.receiver.received, "evt_old") {
		t.Errorf("an expired event was handed over")
	}
	if h.sub.Status.Recovery.BeyondWindow != 1 || h.counter("beyond_window") != 1 || h.counter("malformed") != 2 {
		t.Errorf("beyond %d (metric %v), malformed metric %v", h.sub.Status.Recovery.BeyondWindow, h.counter("beyond_window"), h.counter("malformed"))
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, hookv1.ReasonBeyondRecoveryWindow+" 1 missed deliveries are beyond the 720h") {
		t.Errorf("no BeyondRecoveryWindow event:\n%s", evs)
	}
}

func TestRecoveryReceiverUnreachableSendsNothing(t *testing.T) {
	f := newFakeRecoverer(decidetest.FetchCaps, missedAt("evt_1", 10, "invoice.paid"))
	h := newRecHarness(t, f)
	h.receiver.probe = http.StatusBadGateway
	mark := metav1.NewTime(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC))
	h.sub.Status.Recovery = &hookv1.RecoveryStatus{Watermark: &mark}
	h.recover()
	run := h.sub.Status.Recovery.LastRun
	if run.Result != hookv1.RecoveryFailed || !strings.Contains(run.Message, "receiver unreachable") {
		t.Errorf("run %s: %s", run.Result, run.Message)
	}
	if len(f.listed) != 0 || len(h.receiver.received) != 0 {
		t.Errorf("listed %d times, handed over %v: nothing should go out", len(f.listed), h.receiver.received)
	}
	if !h.sub.Status.Recovery.Watermark.Equal(&mark) {
		t.Errorf("watermark moved to %s", h.sub.Status.Recovery.Watermark)
	}
}

func TestRecoveryRedeliverStopsAtARateLimit(t *testing.T) {
	e1, e2, e3 := missedAt("d1", 30, "invoice.paid"), missedAt("d2", 20, "invoice.paid"), missedAt("d3", 10, "invoice.paid")
	f := newFakeRecoverer(decidetest.RedeliverCaps, e1, e2, e3)
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing, Failed: 3, Total: 3}
	f.redeliverErr["d2"] = &providers.Error{Kind: providers.RateLimited, StatusCode: 429, RetryAfter: 40 * time.Second}
	h := newRecHarness(t, f)

	wait := h.recover()
	run := h.sub.Status.Recovery.LastRun
	if run.Result != hookv1.RecoveryPartial || wait != 40*time.Second {
		t.Fatalf("run %s, requeue %s; want Partial after the stated 40s: %s", run.Result, wait, run.Message)
	}
	if diff := cmp.Diff([]string{"d1", "d2"}, f.redelivered); diff != "" {
		t.Errorf("asked for (-want +got):\n%s", diff)
	}
	if !h.sub.Status.Recovery.Watermark.Time.Equal(e1.At) {
		t.Errorf("watermark %s, want the oldest still missed (d1 %s): nothing is confirmed delivered yet", h.sub.Status.Recovery.Watermark, e1.At)
	}
	if c := meta.FindStatusCondition(h.sub.Status.Conditions, hookv1.ConditionDelivering); c == nil || c.Reason != hookv1.ReasonFailing || c.Status != metav1.ConditionFalse {
		t.Errorf("Delivering %+v, want False Failing", c)
	}

	// A requested run while the limit still says wait: no request at all.
	h.sub.Annotations = map[string]string{hookv1.AnnotationRecoverRequestedAt: "now"}
	h.clock.Advance(10 * time.Second)
	listed := len(f.listed)
	h.recover()
	if len(f.listed) != listed || len(f.redelivered) != 2 {
		t.Errorf("requests sent while the rate limit was in force: %d lists, %v", len(f.listed)-listed, f.redelivered)
	}
	if run := h.sub.Status.Recovery.LastRun; run.Result != hookv1.RecoveryFailed || h.sub.Status.Recovery.LastHandledRequestedAt != "now" {
		t.Errorf("requested run %s (handled %q), want Failed and the request handled", run.Result, h.sub.Status.Recovery.LastHandledRequestedAt)
	}

	// Past the wait, d1 arrived (the provider lists it no more); d2 and d3 are asked for.
	h.clock.Advance(10 * time.Minute)
	f.log = []providers.Missed{e2, e3}
	h.recover()
	if diff := cmp.Diff([]string{"d1", "d2", "d2", "d3"}, f.redelivered); diff != "" {
		t.Errorf("asked for (-want +got):\n%s", diff)
	}
	if !h.sub.Status.Recovery.Watermark.Time.Equal(e2.At) {
		t.Errorf("watermark %s, want d2's %s", h.sub.Status.Recovery.Watermark, e2.At)
	}
	if got := h.sub.Status.Recovery.Recovered; got != 3 {
		t.Errorf("recovered %d in all, want 3", got)
	}
}

func TestRecoveryRedeliverKeepsTheProvidersRedeliveryRate(t *testing.T) {
	rc := decidetest.RedeliverCaps
	rc.RedeliverRate = providers.Rate{PerSecond: 5.0 / 60, Burst: 2}
	f := newFakeRecoverer(rc, missedAt("d1", 40, "invoice.paid"), missedAt("d2", 30, "invoice.paid"), missedAt("d3", 20, "invoice.paid"))
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing}
	h := newRecHarness(t, f)
	wait := h.recover()
	if diff := cmp.Diff([]string{"d1", "d2"}, f.redelivered); diff != "" {
		t.Errorf("asked for (-want +got):\n%s", diff)
	}
	if wait != 12*time.Second {
		t.Errorf("requeue %s, want 12s (5 a minute)", wait)
	}
	if run := h.sub.Status.Recovery.LastRun; run.Result != hookv1.RecoveryPartial || !strings.Contains(run.Message, "1 deliveries left") {
		t.Errorf("run %s: %s", run.Result, run.Message)
	}
}

func TestRecoveryRedeliverReportsWhatCannotComeBack(t *testing.T) {
	gone := missedAt("d0", 60, "invoice.paid")
	gone.Expired = true
	f := newFakeRecoverer(decidetest.RedeliverCaps, gone, missedAt("d1", 30, "invoice.paid"), missedAt("d2", 20, "invoice.paid"))
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing}
	f.redeliverErr["d1"] = &providers.Error{Kind: providers.NotFound, StatusCode: 404}
	h := newRecHarness(t, f)
	h.recover()
	run := h.sub.Status.Recovery.LastRun
	if diff := cmp.Diff([4]int64{1, 0, 2, 0}, runCounts(run)); diff != "" {
		t.Errorf("recovered, skipped, beyond, malformed (-want +got):\n%s", diff)
	}
	if slices.Contains(f.redelivered, "d0") {
		t.Errorf("an expired delivery was asked for")
	}
	if run.Result != hookv1.RecoverySucceeded {
		t.Errorf("run %s: %s", run.Result, run.Message)
	}
}

func TestRecoveryRangeAndReenable(t *testing.T) {
	f := newFakeRecoverer(decidetest.RangeCaps)
	f.report = &providers.DeliveryHealth{State: providers.HealthDisabled, Message: "disabled after 40 failures"}
	h := newRecHarness(t, f)
	mark := metav1.NewTime(h.clock.Now().Add(-3 * time.Hour))
	h.sub.Status.Recovery = &hookv1.RecoveryStatus{Watermark: &mark}
	h.recover()
	if f.reenabled != 1 {
		t.Errorf("re-enabled %d times, want once", f.reenabled)
	}
	if diff := cmp.Diff([]time.Time{mark.Time}, f.rangeSince); diff != "" {
		t.Errorf("RecoverSince (-want +got):\n%s", diff)
	}
	st := h.sub.Status.Recovery
	if st.LastRun.Result != hookv1.RecoverySucceeded || !st.Watermark.Time.Equal(st.LastRun.StartTime.Time) {
		t.Errorf("run %s, watermark %s; want Succeeded and the run's start", st.LastRun.Result, st.Watermark)
	}
	// Enabled again: Unknown until the provider reports a delivery (issue 27).
	if c := meta.FindStatusCondition(h.sub.Status.Conditions, hookv1.ConditionDelivering); c == nil || c.Reason != hookv1.ReasonUnknown || !strings.Contains(c.Message, "enabled again") {
		t.Errorf("Delivering %+v, want Unknown after the re-enable", c)
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, hookv1.ReasonReenabled) {
		t.Errorf("no Reenabled event:\n%s", evs)
	}
}

func TestRecoveryOffRefusesARequest(t *testing.T) {
	f := newFakeRecoverer(decidetest.FetchCaps, missedAt("evt_1", 10, "invoice.paid"))
	h := newRecHarness(t, f)
	h.sub.Spec.Recovery.Mode = hookv1.RecoveryOff
	h.sub.Annotations = map[string]string{hookv1.AnnotationRecoverRequestedAt: "1"}
	h.recover()
	st := h.sub.Status.Recovery
	if st.LastHandledRequestedAt != "1" || !strings.Contains(st.Message, "mode is Off") || st.LastRun != nil {
		t.Errorf("status %+v, want the request handled with a refusal and no run", st)
	}
	if len(f.listed) != 0 {
		t.Errorf("the provider was asked")
	}
}

func TestRecoveryUnavailableSaysSo(t *testing.T) {
	h := newRecHarness(t, newFakeRecoverer(decidetest.NoneCaps))
	h.recover()
	st := h.sub.Status.Recovery
	if st.Available || st.Message != decide.RecoveryUnavailable {
		t.Errorf("available %v, message %q", st.Available, st.Message)
	}
}

func TestDeliveryHealthAskedAgainAfterARecovery(t *testing.T) {
	f := newFakeRecoverer(decidetest.RedeliverCaps, missedAt("guid-1", 10, "invoice.paid"))
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing, Failed: 1, Total: 1}
	h := newRecHarness(t, f)
	h.recover()
	if run := h.sub.Status.Recovery.LastRun; run == nil || run.Recovered != 1 {
		t.Fatalf("run %+v, want one redelivery", run)
	}
	// The redelivery succeeded at the provider: its next report says so.
	f.report = &providers.DeliveryHealth{State: providers.HealthHealthy, Failed: 1, Total: 2}
	f.log = nil
	h.clock.Advance(time.Minute)
	h.recover()
	if f.healthCalls != 2 {
		t.Errorf("asked %d times; want the report asked again at the reconcile after a run that recovered something", f.healthCalls)
	}
	if c := meta.FindStatusCondition(h.sub.Status.Conditions, hookv1.ConditionDelivering); c == nil || c.Reason != hookv1.ReasonHealthy {
		t.Errorf("Delivering %+v, want Healthy right after the recovery", c)
	}
}

func TestDeliveryHealthAskedOncePerResync(t *testing.T) {
	f := newFakeRecoverer(decidetest.RedeliverCaps)
	f.report = &providers.DeliveryHealth{State: providers.HealthHealthy, Failed: 0, Total: 5}
	h := newRecHarness(t, f)
	h.recover()
	h.clock.Advance(time.Minute)
	h.recover()
	if f.healthCalls != 1 {
		t.Errorf("asked %d times within one resync interval, want once", f.healthCalls)
	}
	c := meta.FindStatusCondition(h.sub.Status.Conditions, hookv1.ConditionDelivering)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != hookv1.ReasonHealthy {
		t.Errorf("Delivering %+v, want True Healthy", c)
	}
	if v := metricValue(t, h.r.Metrics.deliveryHealth.WithLabelValues("shop", "orders", "stripe", "healthy")); v != 1 {
		t.Errorf("healthy gauge %v", v)
	}
	h.clock.Advance(10 * time.Minute)
	f.report = nil
	h.recover()
	if f.healthCalls != 2 {
		t.Errorf("asked %d times after a resync interval, want twice", f.healthCalls)
	}
	if c := meta.FindStatusCondition(h.sub.Status.Conditions, hookv1.ConditionDelivering); c.Reason != hookv1.ReasonUnknown || c.Status != metav1.ConditionUnknown {
		t.Errorf("Delivering %+v, want Unknown", c)
	}
	if v := metricValue(t, h.r.Metrics.deliveryHealth.WithLabelValues("shop", "orders", "stripe", "healthy")); v != 0 {
		t.Errorf("healthy gauge %v after the state changed", v)
	}
}

// A run its manager never finished (killed mid-run: status says Running, with the counts it
// persisted after each page): the next run adds those counts to the totals, since the events
// behind the watermark are not handed over again and finish never added them.
func TestRecoveryAfterAKilledRunKeepsItsCounts(t *testing.T) {
	e1, e2 := missedAt("evt_1", 40, "invoice.paid"), missedAt("evt_2", 10, "invoice.paid")
	f := newFakeRecoverer(decidetest.FetchCaps, e1, e2)
	h := newRecHarness(t, f)
	mark := metav1.NewTime(e1.At)
	h.sub.Status.Recovery = &hookv1.RecoveryStatus{Watermark: &mark, Recovered: 7,
		LastRun: &hookv1.RecoveryRun{Trigger: hookv1.TriggerAuto, StartTime: metav1.NewTime(h.clock.Now().Add(-time.Hour)), Result: hookv1.RecoveryRunning, Recovered: 3, Skipped: 1}}
	h.ledgerHas("evt_1") // handed over by the killed run; listed again from the watermark

	h.recover()
	st := h.sub.Status.Recovery
	if st.LastRun.Result != hookv1.RecoverySucceeded || st.LastRun.Recovered != 1 || st.LastRun.Skipped != 1 {
		t.Fatalf("run %+v, want Succeeded with evt_2 recovered and evt_1 skipped", st.LastRun)
	}
	if st.Recovered != 7+3+1 || st.Skipped != 1+1 {
		t.Errorf("totals recovered %d, skipped %d; want 11 and 2 (the killed run's 3 and 1 included)", st.Recovered, st.Skipped)
	}
}

func (h *recHarness) ledgerHas(id string) { h.receiver.ledger[id] = true }

// TestDeliveryHealthFromTheListAlone: what the list says about deliveries costs nothing; the
// provider's report of recent deliveries is asked only where the list says failing, says nothing
// at all, or says healthy again after failures (how many failed decides whether a run is due).
func TestDeliveryHealthFromTheListAlone(t *testing.T) {
	f := newFakeRecoverer(decidetest.RedeliverCaps)
	f.report = &providers.DeliveryHealth{State: providers.HealthHealthy, Failed: 2, Total: 9}
	h := newRecHarness(t, f)
	h.sub.Spec.Recovery.Mode = hookv1.RecoveryOff
	step := func(list *providers.DeliveryHealth) {
		h.reg.Health = list
		h.clock.Advance(11 * time.Minute) // past the report's memo
		h.recover()
	}
	step(&providers.DeliveryHealth{State: providers.HealthUnknown, Message: "nothing delivered yet"})
	if f.healthCalls != 0 {
		t.Errorf("report asked %d times for a registration nothing was delivered to", f.healthCalls)
	}
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing, Failed: 2, Total: 7}
	step(&providers.DeliveryHealth{State: providers.HealthFailing, Message: "last response 502"})
	f.report = &providers.DeliveryHealth{State: providers.HealthHealthy, Failed: 2, Total: 9}
	if f.healthCalls != 1 {
		t.Errorf("report asked %d times when the list says failing, want 1", f.healthCalls)
	}
	step(&providers.DeliveryHealth{State: providers.HealthHealthy, Message: "last response 200"})
	if f.healthCalls != 2 {
		t.Errorf("report asked %d times when the list says healthy right after failures, want 2 (the receiver is back: how many failed?)", f.healthCalls)
	}
	step(&providers.DeliveryHealth{State: providers.HealthHealthy, Message: "last response 200"})
	if f.healthCalls != 2 {
		t.Errorf("report asked %d times in a steady healthy state, want no more", f.healthCalls)
	}
	step(nil)
	if f.healthCalls != 3 {
		t.Errorf("report asked %d times when the list says nothing (organization hooks), want 3", f.healthCalls)
	}
}

// TestRecoverySharedLook: on a provider whose listing of missed events is account-wide
// (Stripe), the subscriptions of one account in one wave share one listing; one with nothing
// missed starts no run and writes nothing but its watermark; one the listing shows something
// for runs as before; a listing cut short answers nothing for certain.
func TestRecoverySharedLook(t *testing.T) {
	wide := decidetest.FetchCaps
	wide.AccountWide = true
	elsewhere := missedAt("evt_other", 5, "charge.refunded") // failed at another endpoint of the account
	f := newFakeRecoverer(wide, elsewhere)
	h := newRecHarness(t, f)
	watermark := metav1.NewTime(h.clock.Now().Add(-10 * time.Minute)) // the last wave's
	h.sub.Status.Recovery = &hookv1.RecoveryStatus{Watermark: &watermark, LastRun: &hookv1.RecoveryRun{
		Trigger: hookv1.TriggerAuto, Result: hookv1.RecoverySucceeded, StartTime: watermark}}
	second := h.sub.DeepCopy()
	second.Name, second.UID = "refunds", "uid-refunds"
	second.Spec.Events = []string{"invoice.paid"}
	target := recoveryTarget{acct: h.acct, kept: h.reg, secret: recSecret, listAge: time.Minute}

	for _, sub := range []*hookv1.WebhookSubscription{h.sub, second} {
		if wait := h.r.recoverMissed(context.Background(), sub, target); wait != 0 {
			t.Fatalf("%s: requeue %s", sub.Name, wait)
		}
		st := sub.Status.Recovery
		if st.LastRun.StartTime != watermark {
			t.Errorf("%s: a run started (%+v); nothing of its types was missed", sub.Name, st.LastRun)
		}
		if !st.Watermark.Time.Equal(h.clock.Now()) {
			t.Errorf("%s: watermark %s, want the look's time %s", sub.Name, st.Watermark.Time, h.clock.Now())
		}
	}
	if len(f.listed) != 1 {
		t.Fatalf("two subscriptions of one account listed missed events %d times, want once (shared)", len(f.listed))
	}
	if want := h.clock.Now().Add(-30 * time.Minute); !f.listed[0].Equal(want) {
		t.Errorf("the shared look listed from %s, want three intervals back (%s), so the wave's older watermarks are covered", f.listed[0], want)
	}
	if len(h.receiver.received) != 0 {
		t.Errorf("the endpoint received %v", h.receiver.received)
	}

	// Something of the subscription's type: the look says so, and the run lists for itself.
	missed := providers.Missed{ID: "evt_9", At: h.clock.Now().Add(5 * time.Minute), Type: "invoice.paid", Payload: []byte(`{"id":"evt_9","type":"invoice.paid"}`)}
	f.mu.Lock()
	f.log = append(f.log, missed)
	f.mu.Unlock()
	h.clock.Advance(11 * time.Minute) // the next wave
	target.listAge = 0                // and a look older than the list the reconcile used
	h.r.recoverMissed(context.Background(), h.sub, target)
	if run := h.sub.Status.Recovery.LastRun; run.Result != hookv1.RecoverySucceeded || run.Recovered != 1 {
		t.Fatalf("run %+v, want one event recovered", run)
	}
	if diff := cmp.Diff([]string{"evt_9"}, h.receiver.received); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}

	// A look cut at its page size cannot say nothing was missed: the subscription runs.
	f.mu.Lock()
	f.pageCap = 1
	f.mu.Unlock()
	h.clock.Advance(11 * time.Minute)
	before := len(f.listed)
	h.r.recoverMissed(context.Background(), second, target)
	if second.Status.Recovery.LastRun.StartTime.Time != h.clock.Now() {
		t.Errorf("after a cut look no run started: %+v", second.Status.Recovery.LastRun)
	}
	if got := len(f.listed) - before; got < 2 {
		t.Errorf("%d listings after a cut look, want the look and the run's own", got)
	}
}

// logOnly is a provider that keeps a log of deliveries and nothing more: no listing of every
// event (providers.EventLister), as on GitLab.
type logOnly struct {
	providers.Client
	providers.Recoverer
	providers.HealthReporter
}

func (h *recHarness) gapCounter(reason string) float64 {
	return metricValue(h.t, h.r.Metrics.recoveryGaps.WithLabelValues("shop", "orders", "stripe", reason))
}

// gitlabLike keeps a log of deliveries, reports health only through its list, and ends a
// temporary disable on the first successful resend (GitLab clears disabled_until then).
type gitlabLike struct {
	*fakeRecoverer
}

func (g gitlabLike) Redeliver(ctx context.Context, reg providers.Registration, m providers.Missed) error {
	if err := g.fakeRecoverer.Redeliver(ctx, reg, m); err != nil {
		return err
	}
	for i := range g.Regs {
		g.Regs[i].Health = &providers.DeliveryHealth{State: providers.HealthHealthy}
	}
	return nil
}

// The look once per resync that finds nothing missed reads no list of its own: only a run
// that is about to send does.
func TestRecoveryQuietLookListsNothingAfresh(t *testing.T) {
	f := newFakeRecoverer(decidetest.PollCaps)
	h := newRecHarnessWith(t, f, struct {
		providers.Client
		providers.Recoverer
	}{f.FakeClient, gitlabLike{f}})
	f.Regs = []providers.Registration{h.reg}
	h.r.recoverMissed(context.Background(), h.sub, recoveryTarget{acct: h.acct, kept: h.reg, secret: recSecret})
	if len(f.listed) != 1 || f.Calls["List"] != 0 || len(f.redelivered) != 0 {
		t.Errorf("looked %d times, listed the account %d times, redelivered %v; want one look and nothing else",
			len(f.listed), f.Calls["List"], f.redelivered)
	}
}

// A run that resends on a provider that cannot list what it never sent starts from a list of
// its own: the reconcile planned from a shared list read before GitLab disabled the hook, the
// disable has ended (disabled_until in the past), and the run's first resend would erase that
// record. The span is reported though no reconcile saw the hook disabled (CI, stop 37: the
// GitLab scenario's disabled span went unreported when the run came right after a shared list).
func TestRecoveryRunListsAfreshOnAProviderThatCannotListEverything(t *testing.T) {
	f := newFakeRecoverer(decidetest.PollCaps)
	g := gitlabLike{f}
	h := newRecHarnessWith(t, f, struct {
		providers.Client
		providers.Recoverer
	}{f.FakeClient, g})
	until := h.clock.Now().Add(-2 * time.Minute).Truncate(time.Second)
	f.log = []providers.Missed{missedAt("push-1", -30, "invoice.paid")}
	stale := h.reg
	stale.Health = &providers.DeliveryHealth{State: providers.HealthHealthy}
	listed := h.reg
	listed.Health = &providers.DeliveryHealth{State: providers.HealthFailing, DisabledUntil: until}
	f.Regs = []providers.Registration{listed}

	h.r.recoverMissed(context.Background(), h.sub, recoveryTarget{acct: h.acct, kept: stale, secret: recSecret})

	if !slices.Equal(f.redelivered, []string{"push-1"}) {
		t.Fatalf("redelivered %v, want push-1", f.redelivered)
	}
	if f.Calls["List"] != 1 {
		t.Errorf("the account listed %d times, want once (the run's own list)", f.Calls["List"])
	}
	gaps := h.sub.Status.Recovery.Gaps
	if len(gaps) != 1 || gaps[0].Reason != hookv1.GapProviderDisabled || !gaps[0].End.Time.Equal(until) {
		t.Errorf("gaps %+v; want one ProviderDisabled gap ending %s (the disable the list reported before the resend ended it)", gaps, until)
	}
}

// Issue 27: GitHub deliveries older than the redelivery window, on a first run (no watermark):
// every failed delivery the provider still lists but will not redeliver is reported (status,
// Event, metric); those inside the window are redelivered.
func TestRecoveryRedeliverFirstRunReportsWhatLiesBeyondTheWindow(t *testing.T) {
	old1, old2 := missedAt("d-old1", 90*60, "invoice.paid"), missedAt("d-old2", 80*60, "invoice.paid")
	old1.Expired, old2.Expired = true, true
	f := newFakeRecoverer(decidetest.RedeliverCaps, old1, old2, missedAt("d1", 10*60, "invoice.paid"), missedAt("d2", 5*60, "invoice.paid"))
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing}
	h := newRecHarness(t, f)
	h.recover()
	run := h.sub.Status.Recovery.LastRun
	if diff := cmp.Diff([4]int64{2, 0, 2, 0}, runCounts(run)); diff != "" || run.Result != hookv1.RecoverySucceeded {
		t.Errorf("run %s: %s; recovered, skipped, beyond, malformed (-want +got):\n%s", run.Result, run.Message, diff)
	}
	if diff := cmp.Diff([]string{"d1", "d2"}, f.redelivered); diff != "" {
		t.Errorf("redelivered (-want +got):\n%s", diff)
	}
	if len(f.listed) != 1 || !f.listed[0].IsZero() {
		t.Errorf("listed from %v, want once from the log's start (a first run)", f.listed)
	}
	if h.sub.Status.Recovery.BeyondWindow != 2 || h.counter("beyond_window") != 2 {
		t.Errorf("status beyondWindow %d, metric %v; want 2", h.sub.Status.Recovery.BeyondWindow, h.counter("beyond_window"))
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, hookv1.ReasonBeyondRecoveryWindow+" 2 missed deliveries") {
		t.Errorf("no BeyondRecoveryWindow Event:\n%s", evs)
	}
}

// Issue 27: a watermark older than what the provider's log still holds: the span between them
// is a gap (status.recovery.gaps, Event, hookwarden_recovery_gaps_total{reason=beyond_window}).
func TestRecoveryRedeliverReportsTheSpanBeforeTheLog(t *testing.T) {
	f := newFakeRecoverer(decidetest.RedeliverCaps, missedAt("d1", 10*60, "invoice.paid"))
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing}
	h := newRecHarness(t, f)
	now := h.clock.Now()
	f.covers = now.Add(-96 * time.Hour) // the log reaches back four days
	mark := metav1.NewTime(now.Add(-120 * time.Hour))
	h.sub.Status.Recovery = &hookv1.RecoveryStatus{Watermark: &mark}
	h.recover()
	st := h.sub.Status.Recovery
	want := []hookv1.RecoveryGap{{Start: mark, End: metav1.NewTime(now.Add(-96 * time.Hour)), Reason: hookv1.GapBeyondWindow}}
	if diff := cmp.Diff(want, st.Gaps); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
	if h.gapCounter("beyond_window") != 1 || h.gapCounter("provider_disabled") != 0 {
		t.Errorf("gap metric beyond_window %v provider_disabled %v", h.gapCounter("beyond_window"), h.gapCounter("provider_disabled"))
	}
	if !strings.Contains(st.LastRun.Message, "cannot be recovered") || !slices.Equal(f.redelivered, []string{"d1"}) {
		t.Errorf("run message %q, redelivered %v", st.LastRun.Message, f.redelivered)
	}
}

// Issue 27: a registration the provider disabled is enabled again once the endpoint answers,
// whatever the recovery mode (Manual here: no run), with the Reenabled Event, and Delivering goes
// DisabledByProvider → Unknown; while the endpoint does not answer it stays disabled.
func TestRecoveryReenablesOnceTheEndpointAnswersInEveryMode(t *testing.T) {
	f := newFakeRecoverer(decidetest.FetchCaps)
	h := newRecHarness(t, f)
	h.sub.Spec.Recovery.Mode = hookv1.RecoveryManual
	h.reg.Health = &providers.DeliveryHealth{State: providers.HealthDisabled, Message: "the endpoint's status is disabled"}
	recover := func() {
		h.r.recoverMissed(context.Background(), h.sub, recoveryTarget{acct: h.acct, kept: h.reg, secret: recSecret, providerDisabled: true})
	}
	h.receiver.probe = http.StatusBadGateway
	recover()
	if f.reenabled != 0 {
		t.Fatalf("re-enabled while the endpoint answers 502")
	}
	if c := meta.FindStatusCondition(h.sub.Status.Conditions, hookv1.ConditionDelivering); c == nil || c.Reason != hookv1.ReasonDisabledByProvider {
		t.Errorf("Delivering %+v, want DisabledByProvider", c)
	}
	h.receiver.probe = 0
	h.clock.Advance(10 * time.Minute)
	recover()
	if f.reenabled != 1 || h.sub.Status.Recovery.LastRun != nil {
		t.Errorf("re-enabled %d times, last run %+v; want once and no run (Manual)", f.reenabled, h.sub.Status.Recovery.LastRun)
	}
	if c := meta.FindStatusCondition(h.sub.Status.Conditions, hookv1.ConditionDelivering); c == nil || c.Reason != hookv1.ReasonUnknown {
		t.Errorf("Delivering %+v, want Unknown once enabled again", c)
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, hookv1.ReasonReenabled) {
		t.Errorf("no Reenabled Event:\n%s", evs)
	}
	// A provider that lists every event (Stripe) brings the disabled span back in a run:
	// providerDisabledAt stays until then.
	if h.sub.Status.Recovery.ProviderDisabledAt == nil || len(h.sub.Status.Recovery.Gaps) != 0 {
		t.Errorf("providerDisabledAt %v, gaps %v; want kept for the next run, no gap", h.sub.Status.Recovery.ProviderDisabledAt, h.sub.Status.Recovery.Gaps)
	}
}

// Issue 27: on a provider that cannot list what it never sent (GitLab), the span it had the
// registration disabled becomes a gap once it delivers again: status, Event, metric.
func TestRecoveryDisabledSpanIsAGapWhereTheProviderCannotListIt(t *testing.T) {
	f := newFakeRecoverer(decidetest.RedeliverCaps)
	f.Caps.Recovery.Poll = true
	h := newRecHarnessWith(t, f, logOnly{Client: f.FakeClient, Recoverer: f, HealthReporter: f})
	disabledAt := metav1.NewTime(h.clock.Now().Add(-30 * time.Minute))
	h.sub.Status.Recovery = &hookv1.RecoveryStatus{ProviderDisabledAt: &disabledAt}
	h.recover() // the registration delivers again (kept without a disabled health)
	st := h.sub.Status.Recovery
	want := []hookv1.RecoveryGap{{Start: metav1.NewTime(disabledAt.Add(-10 * time.Minute)), End: metav1.NewTime(h.clock.Now()), Reason: hookv1.GapProviderDisabled}}
	if diff := cmp.Diff(want, st.Gaps); diff != "" || st.ProviderDisabledAt != nil {
		t.Errorf("gaps (-want +got):\n%s\nproviderDisabledAt %v (want cleared)", diff, st.ProviderDisabledAt)
	}
	if h.gapCounter("provider_disabled") != 1 {
		t.Errorf("hookwarden_recovery_gaps_total{reason=provider_disabled} = %v", h.gapCounter("provider_disabled"))
	}
	if evs := strings.Join(h.events(), "\n"); !strings.Contains(evs, hookv1.ReasonProviderDisabledGap) {
		t.Errorf("no ProviderDisabledGap Event:\n%s", evs)
	}
}

// Issue 27: a provider that neither retries nor reports failures short of disabling (GitLab)
// is looked at once per resync in Auto: a failed delivery comes back although the registration
// looks healthy; a look that finds nothing moves the watermark without a run.
func TestRecoveryPollsWhereTheProviderReportsNoFailure(t *testing.T) {
	f := newFakeRecoverer(decidetest.PollCaps)
	f.report = &providers.DeliveryHealth{State: providers.HealthHealthy}
	h := newRecHarness(t, f)
	h.recover()
	if st := h.sub.Status.Recovery; st.LastRun != nil || st.Watermark == nil || len(f.listed) != 1 {
		t.Fatalf("nothing failed: last run %+v, watermark %v, listed %d; want no run, a watermark, one listing", st.LastRun, st.Watermark, len(f.listed))
	}
	f.log = append(f.log, missedAt("push-1", -5, "invoice.paid")) // failed after the look
	h.clock.Advance(10 * time.Minute)
	h.recover()
	run := h.sub.Status.Recovery.LastRun
	if run == nil || run.Trigger != hookv1.TriggerAuto || run.Recovered != 1 || !slices.Equal(f.redelivered, []string{"push-1"}) {
		t.Fatalf("run %+v, redelivered %v; want an Auto run that redelivered push-1", run, f.redelivered)
	}
	if len(f.listed) != 2 {
		t.Errorf("listed %d times, want one listing a resync (the run uses the look's)", len(f.listed))
	}
}

// Issue 27: a provider that disabled the registration and enabled it again between two looks
// (GitLab's temporary disable: its disabled_until stays, in the past, until a delivery succeeds)
// has its span recorded once from that record, though it was never seen disabled.
func TestRecoveryDisabledBetweenTwoLooksIsAGapOnce(t *testing.T) {
	f := newFakeRecoverer(decidetest.PollCaps)
	h := newRecHarnessWith(t, f, logOnly{Client: f.FakeClient, Recoverer: f, HealthReporter: f})
	until := h.clock.Now().Add(-2 * time.Minute).Truncate(time.Second)
	f.report = &providers.DeliveryHealth{State: providers.HealthFailing, DisabledUntil: until}
	h.recover()
	h.clock.Advance(10 * time.Minute)
	h.r.health.forgetSubscription("shop/orders")
	h.recover() // the record is still there: no second gap
	want := []hookv1.RecoveryGap{{Start: metav1.NewTime(until.Add(-10 * time.Minute)), End: metav1.NewTime(until), Reason: hookv1.GapProviderDisabled}}
	if diff := cmp.Diff(want, h.sub.Status.Recovery.Gaps); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
	if h.gapCounter("provider_disabled") != 1 {
		t.Errorf("gap metric %v, want 1", h.gapCounter("provider_disabled"))
	}
}
