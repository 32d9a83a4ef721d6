package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/childproc"
	"github.com/hookwarden/hookwarden/internal/routesecret"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver/store" // also registers the "pgx" driver
)

// probePrefix marks the throwaway events sent to find out whether a route is live; the
// scenarios' assertions ignore them.
const probePrefix = "evt_probe_"

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newSecret() string { return "whsec_" + randHex(16) }

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := childproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// eventually polls cond until it holds or timeout passes; then it fails the test with what and
// cond's last explanation.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if err := poll(timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// poll is eventually without the test: it returns an error once timeout has passed.
func poll(timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, detail)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// --- Kubernetes objects ------------------------------------------------------------------------

// newNamespace is where every test of the running receiver starts: under -short (make unit)
// the receiver binary and the control plane are not started, and such a test skips here.
func newNamespace(t testing.TB) string {
	t.Helper()
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	name := "e2e-" + randHex(4)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return name
}

// signingData is the Secret data the manager writes: the current secret and one key per live
// registration.
func signingData(current string, byEndpoint map[string]string) map[string][]byte {
	d := map[string][]byte{hookv1.SecretKeyCurrent: []byte(current)}
	for id, s := range byEndpoint {
		d[hookv1.SecretKeyPrefix+id] = []byte(s)
	}
	return d
}

// subscription is a WebhookSubscription with its signing Secret, as the manager leaves them.
type subscription struct {
	Namespace, Name, UID string
	SecretName           string
	Secret               string // current signing secret
}

func (s subscription) path() string   { return "/hooks/" + s.Namespace + "/" + s.Name }
func (s subscription) source() string { return "hookwarden/" + s.Namespace + "/" + s.Name }

// createSubscription writes the subscription delivering to sinkURL and then, as the manager
// does, its route Secret in the receiver's namespace (here the subscription's own).
func createSubscription(t testing.TB, ns, name, sinkURL string, maxAttempts int32) subscription {
	t.Helper()
	return createSubscriptionWith(t, ns, name, &hookv1.DeliverySpec{Sink: &hookv1.SinkSpec{URL: sinkURL}, MaxAttempts: maxAttempts}, nil)
}

// createSubscriptionWith is createSubscription with any spec.delivery, and sinkData (the sinks'
// credentials, as the manager would copy them) added to the route Secret.
func createSubscriptionWith(t testing.TB, ns, name string, delivery *hookv1.DeliverySpec, sinkData map[string][]byte) subscription {
	t.Helper()
	ctx := context.Background()
	s := subscription{Namespace: ns, Name: name, SecretName: name + "-signing", Secret: newSecret()}
	sub := &hookv1.WebhookSubscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: hookv1.WebhookSubscriptionSpec{
			Provider: hookv1.ProviderSpec{Type: hookv1.ProviderStripe,
				CredentialsRef: hookv1.SecretKeySelector{Name: "stripe-credentials", Key: "apiKey"}},
			Endpoint:      hookv1.EndpointSpec{Receiver: &hookv1.ReceiverEndpoint{}},
			Events:        []string{"invoice.paid"},
			SigningSecret: hookv1.SigningSecretSpec{Name: s.SecretName},
			Delivery:      delivery,
		},
	}
	if err := k8s.Create(ctx, sub); err != nil {
		t.Fatalf("creating subscription: %v", err)
	}
	s.UID = string(sub.UID)
	sec := routesecret.New(ns, routesecret.Source{Namespace: ns, Name: name, UID: s.UID}, signingData(s.Secret, map[string]string{"we_test": s.Secret}))
	// routesecret.New keeps the signing keys only: the manager does not copy sink credentials
	// yet, so the test puts them there itself.
	maps.Copy(sec.Data, sinkData)
	if err := k8s.Create(ctx, sec); err != nil {
		t.Fatalf("creating the route Secret: %v", err)
	}
	return s
}

// setSigningSecret replaces the data of a subscription's route Secret, as the manager does
// with each write of the signing Secret.
func setSigningSecret(t testing.TB, s subscription, data map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	var sec corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: routesecret.Name(s.Namespace, s.Name)}, &sec); err != nil {
		t.Fatalf("reading the route Secret: %v", err)
	}
	sec.Data = data
	if err := k8s.Update(ctx, &sec); err != nil {
		t.Fatalf("updating the route Secret: %v", err)
	}
}

// --- receiver processes ------------------------------------------------------------------------

// receiverProc is one receiver process; start and restart reuse its addresses and store.
type receiverProc struct {
	t       testing.TB
	name    string
	Bind    string // deliveries
	Probe   string // /healthz, /readyz
	Store   string
	args    []string
	env     []string
	logPath string

	mu   sync.Mutex
	proc *child // the last run
	runs int
}

type receiverConfig struct {
	Namespace string
	Store     string
	Extra     []string // more flags; later ones override the defaults
	Env       []string // more environment (OTEL_*)
}

// newReceiver prepares (does not start) a receiver process.
func newReceiver(t testing.TB, name string, c receiverConfig) *receiverProc {
	t.Helper()
	r := &receiverProc{
		t: t, name: name, Bind: freeAddr(t), Probe: freeAddr(t), Store: c.Store, env: c.Env,
		logPath: filepath.Join(t.TempDir(), name+".log"),
	}
	r.args = append([]string{"serve",
		"--bind-address", r.Bind,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", r.Probe,
		"--store", c.Store,
		"--namespace", c.Namespace,
		"--receiver-namespace", c.Namespace,
		"--retry-base", "50ms",
		"--retry-max", "500ms",
		"--lease", "3s",
		"--delivery-timeout", "1s",
		"--poll-interval", "50ms",
		"--shutdown-grace", "10s",
	}, c.Extra...)
	t.Cleanup(func() {
		r.Kill()
		if b, err := os.ReadFile(r.logPath); err == nil && bytes.Contains(b, []byte("WARNING: DATA RACE")) {
			t.Errorf("%s: the race detector reported a data race, see %s", r.name, r.logPath)
			r.dumpLog(200)
		} else if t.Failed() {
			r.dumpLog(80)
		}
	})
	return r
}

// startReceiver starts a receiver and waits until it is ready and routes sub.
func startReceiver(t testing.TB, name string, c receiverConfig, sub subscription) *receiverProc {
	t.Helper()
	r := newReceiver(t, name, c)
	r.Start()
	r.WaitRoute(sub, sub.Secret)
	return r
}

func (r *receiverProc) URL() string { return "http://" + r.Bind }

// Start runs the receiver process.
func (r *receiverProc) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil && !r.proc.exited() {
		r.t.Fatalf("%s: already running", r.name)
	}
	r.runs++
	cmd := exec.Command(receiverBin, r.args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfigPath), r.env...)
	proc, err := startChild(cmd, r.logPath, fmt.Sprintf("=== run %d: %s", r.runs, strings.Join(r.args, " ")))
	if err != nil {
		r.t.Fatalf("%s: starting: %v", r.name, err)
	}
	r.proc = proc
}

func (r *receiverProc) running() *child {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// Kill sends SIGKILL to the receiver's process group and waits for it to exit.
func (r *receiverProc) Kill() {
	p := r.running()
	if p == nil || p.exited() {
		return
	}
	p.killGroup()
	if !p.wait(10 * time.Second) {
		r.t.Errorf("%s: still running 10s after SIGKILL", r.name)
	}
}

// Signal sends sig to the receiver process.
func (r *receiverProc) Signal(sig syscall.Signal) {
	r.t.Helper()
	p := r.running()
	if p == nil {
		r.t.Fatalf("%s: not started", r.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("%s: signal %v: %v", r.name, sig, err)
	}
}

// Wait waits up to timeout for the process to exit and returns its exit error.
func (r *receiverProc) Wait(timeout time.Duration) error {
	r.t.Helper()
	p := r.running()
	if !p.wait(timeout) {
		r.t.Fatalf("%s: did not exit within %s", r.name, timeout)
	}
	return p.err
}

func (r *receiverProc) exited() bool { return r.running().exited() }

// WaitReady waits for /readyz.
func (r *receiverProc) WaitReady() {
	r.t.Helper()
	c := &http.Client{Timeout: time.Second}
	eventually(r.t, 30*time.Second, r.name+" /readyz", func() (bool, string) {
		if r.exited() {
			r.t.Fatalf("%s exited while starting: %v", r.name, r.running().err)
		}
		resp, err := c.Get("http://" + r.Probe + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

// WaitRoute waits for /readyz and then until a delivery to sub, signed with secret, is accepted
// (the route is live with that secret). The throwaway probe events reach the sink too.
func (r *receiverProc) WaitRoute(sub subscription, secret string) {
	r.t.Helper()
	r.WaitReady()
	cl := newClient(r.URL())
	eventually(r.t, 30*time.Second, r.name+" routing "+sub.path(), func() (bool, string) {
		if r.exited() {
			r.t.Fatalf("%s exited while starting: %v", r.name, r.running().err)
		}
		status, err := cl.Post(sub, stripeEvent(probePrefix+randHex(6)), secret)
		if err != nil {
			return false, err.Error()
		}
		return status == http.StatusAccepted, strconv.Itoa(status)
	})
}

func (r *receiverProc) dumpLog(lines int) {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	r.t.Logf("--- last %d log lines of %s (%s):\n%s", len(all), r.name, r.logPath, strings.Join(all, "\n"))
}

// runCLI runs a receiver subcommand to completion and returns its stdout.
func runCLI(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, receiverBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("receiver %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// --- provider-side client ----------------------------------------------------------------------

func stripeEvent(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid","data":{"object":{"id":"in_%s"}}}`, id, id))
}

// provider posts Stripe-signed deliveries to receivers: with several bases, each request goes to
// the next one in turn, as a load balancer in front of replicas would send it.
type provider struct {
	bases []string
	next  atomic.Uint64
	http  *http.Client
}

func newClient(bases ...string) *provider {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	return &provider{bases: bases, http: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

// Post sends one delivery, signed now with secret. err is a transport error (no response).
func (c *provider) Post(sub subscription, body []byte, secret string) (int, error) {
	base := c.bases[(c.next.Add(1)-1)%uint64(len(c.bases))]
	req, err := http.NewRequest(http.MethodPost, base+sub.path(), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(stripe.SignatureHeader, stripe.SignHeader(secret, time.Now(), body))
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// attempt is one HTTP request of a delivery.
type attempt struct {
	start, end time.Time
	status     int   // 0: no response
	err        error // transport error
}

// delivery is one event sent by a provider that retries connection errors and 503s.
type delivery struct {
	eventID  string
	attempts []attempt
}

func (d *delivery) acked() bool {
	n := len(d.attempts)
	return n > 0 && d.attempts[n-1].status >= 200 && d.attempts[n-1].status < 300
}

// deliverWithRetries posts the event until it gets a 2xx, a status other than 503, or the
// deadline passes. Connection errors and 503s are retried with a short capped backoff.
func (c *provider) deliverWithRetries(sub subscription, eventID string, deadline time.Time, onAttempt func(attempt)) *delivery {
	d := &delivery{eventID: eventID}
	body := stripeEvent(eventID)
	wait := 10 * time.Millisecond
	for {
		a := attempt{start: time.Now()}
		a.status, a.err = c.Post(sub, body, sub.Secret)
		a.end = time.Now()
		d.attempts = append(d.attempts, a)
		if onAttempt != nil {
			onAttempt(a)
		}
		if a.err == nil && a.status != http.StatusServiceUnavailable {
			return d
		}
		if time.Now().After(deadline) {
			return d
		}
		time.Sleep(wait)
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// --- sink --------------------------------------------------------------------------------------

// answer is one scripted sink response.
type answer struct {
	status     int
	retryAfter string
}

// script is what the sink answers for one event: seq in order, then `then` forever.
type script struct {
	seq  []answer
	then answer
}

// arrival is one delivery request the sink received.
type arrival struct {
	at, answered time.Time
	key, ceID    string
	status       int // what the sink answered
}

// faults makes the sink fail a fraction of the deliveries of events it has no script for with a
// 500, 502 or 503 (so the receivers must retry), at most max times per event (so no event runs
// out of attempts because of them). Seeded: the same seed draws the same pattern.
type faults struct {
	rng    *mrand.Rand
	rate   float64
	max    int
	failed map[string]int // ce-id -> failures so far
}

func (f *faults) answer(eventID string) answer {
	if f.failed[eventID] >= f.max || f.rng.Float64() >= f.rate {
		return answer{status: http.StatusOK}
	}
	f.failed[eventID]++
	return answer{status: []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[f.rng.IntN(3)]}
}

// sink is the user's event consumer: it records every delivery and processes each event once,
// recognising repeats by Idempotency-Key.
type sink struct {
	t   testing.TB
	srv *httptest.Server

	mu        sync.Mutex
	uids      map[string]string // ce-source -> subscription UID
	scripts   map[string]*script
	faults    *faults // for events without a script; nil: they all succeed
	arrivals  []arrival
	byKey     map[string][]int           // Idempotency-Key -> indexes into arrivals
	processed map[string]string          // Idempotency-Key -> ce-id, once processed (first 2xx)
	perEvent  map[string]map[string]bool // ce-id -> keys under which it was processed
	problems  []string
}

func newSink(t testing.TB) *sink {
	s := &sink{t: t, uids: map[string]string{}, scripts: map[string]*script{}, byKey: map[string][]int{},
		processed: map[string]string{}, perEvent: map[string]map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

func (s *sink) URL() string { return s.srv.URL + "/events" }

// expect registers a subscription whose deliveries the sink checks.
func (s *sink) expect(sub subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uids[sub.source()] = sub.UID
}

// failSome makes the sink fail deliveries at random (see faults).
func (s *sink) failSome(rate float64, maxPerEvent int, seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = &faults{rng: mrand.New(mrand.NewPCG(seed, 0x5eed)), rate: rate, max: maxPerEvent, failed: map[string]int{}}
}

// setScript sets what the sink answers for an event.
func (s *sink) setScript(eventID string, sc script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts[eventID] = &sc
}

func (s *sink) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	h := r.Header
	ceID, key := h.Get("ce-id"), h.Get("Idempotency-Key")

	s.mu.Lock()
	defer s.mu.Unlock()
	problem := func(format string, args ...any) {
		s.problems = append(s.problems, fmt.Sprintf("event %q: ", ceID)+fmt.Sprintf(format, args...))
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		problem("body is not the provider's JSON: %v", err)
	}
	switch {
	case r.Method != http.MethodPost:
		problem("method %s", r.Method)
	case h.Get("ce-specversion") != "1.0":
		problem("ce-specversion %q", h.Get("ce-specversion"))
	case ceID == "" || ceID != ev.ID:
		problem("ce-id %q, body id %q", ceID, ev.ID)
	case h.Get("ce-type") != ev.Type:
		problem("ce-type %q, body type %q", h.Get("ce-type"), ev.Type)
	case h.Get("Content-Type") != "application/json":
		problem("Content-Type %q", h.Get("Content-Type"))
	case h.Get("ce-time") == "":
		problem("no ce-time")
	}
	if uid, ok := s.uids[h.Get("ce-source")]; !ok {
		problem("unexpected ce-source %q", h.Get("ce-source"))
	} else if want := uid + ":" + ceID; key != want {
		problem("Idempotency-Key %q, want %q", key, want)
	}

	ans := answer{status: http.StatusOK}
	if sc := s.scripts[ceID]; sc != nil {
		if len(sc.seq) > 0 {
			ans, sc.seq = sc.seq[0], sc.seq[1:]
		} else {
			ans = sc.then
		}
	} else if s.faults != nil {
		ans = s.faults.answer(ceID)
	}
	if ans.status >= 200 && ans.status < 300 {
		if _, done := s.processed[key]; !done {
			// First 2xx under this key: the sink processes the event. Repeats are dropped.
			s.processed[key] = ceID
			if s.perEvent[ceID] == nil {
				s.perEvent[ceID] = map[string]bool{}
			}
			s.perEvent[ceID][key] = true
		}
	}
	s.byKey[key] = append(s.byKey[key], len(s.arrivals))
	s.arrivals = append(s.arrivals, arrival{at: at, answered: time.Now(), key: key, ceID: ceID, status: ans.status})
	if ans.retryAfter != "" {
		w.Header().Set("Retry-After", ans.retryAfter)
	}
	w.WriteHeader(ans.status)
}

// arrivalsOf returns the deliveries of one event, in order.
func (s *sink) arrivalsOf(eventID string) []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []arrival
	for _, a := range s.arrivals {
		if a.ceID == eventID {
			out = append(out, a)
		}
	}
	return out
}

// ledger summarises what the sink holds for a set of events (probes excluded).
type ledger struct {
	processed   int // events processed (at least once)
	missing     []string
	twice       []string // events processed under more than one Idempotency-Key
	unexpected  []string // processed events that were never sent
	arrivals    int      // delivery requests for the events, repeats included
	failed      int      // arrivals the sink answered with something other than 2xx
	redelivered int      // 2xx deliveries of an already processed key (dropped by the sink)
	// firstOK holds, for each redelivery, when the sink had first answered 2xx under its key.
	firstOK  []time.Time
	problems []string
}

// want are the events that must have been processed (acknowledged to the provider); sent, when
// not nil, are all the events the provider sent: an event whose acknowledgement was lost (the
// receiver was killed after its commit) may be processed without being wanted.
func (s *sink) ledgerFor(want, sent map[string]bool) ledger {
	if sent == nil {
		sent = want
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var l ledger
	for id := range want {
		switch n := len(s.perEvent[id]); {
		case n == 0:
			l.missing = append(l.missing, id)
		case n > 1:
			l.twice = append(l.twice, id)
			l.processed++
		default:
			l.processed++
		}
	}
	for id := range s.perEvent {
		if !want[id] && !sent[id] && !strings.HasPrefix(id, probePrefix) {
			l.unexpected = append(l.unexpected, id)
		}
	}
	firstOK := map[string]time.Time{}
	for _, a := range s.arrivals {
		if strings.HasPrefix(a.ceID, probePrefix) {
			continue
		}
		l.arrivals++
		if a.status < 200 || a.status >= 300 {
			l.failed++
			continue
		}
		if at, seen := firstOK[a.key]; seen {
			l.redelivered++
			l.firstOK = append(l.firstOK, at)
		} else {
			firstOK[a.key] = a.answered
		}
	}
	l.problems = append(l.problems, s.problems...)
	sort.Strings(l.missing)
	sort.Strings(l.twice)
	sort.Strings(l.unexpected)
	return l
}

// check fails the test unless every wanted event was processed exactly once and nothing else
// was, and every delivery was well-formed.
func (l ledger) check(t testing.TB) {
	t.Helper()
	if len(l.missing) > 0 {
		t.Errorf("%d acknowledged events never reached the sink, e.g. %v", len(l.missing), first(l.missing, 5))
	}
	if len(l.twice) > 0 {
		t.Errorf("%d events processed twice (under different Idempotency-Keys), e.g. %v", len(l.twice), first(l.twice, 5))
	}
	if len(l.unexpected) > 0 {
		t.Errorf("%d events the sink processed were never sent: %v", len(l.unexpected), first(l.unexpected, 5))
	}
	if len(l.problems) > 0 {
		t.Errorf("%d malformed deliveries, e.g. %v", len(l.problems), first(l.problems, 5))
	}
}

func first[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// --- store -------------------------------------------------------------------------------------

// openStore opens the receiver's store from the test process (the test's view of the queue).
// receiverFlags are the receiver's extra flags: a --store-promise among them is accepted here too.
func openStore(t testing.TB, dsn string, receiverFlags ...string) store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var opts []store.Option
	for i, f := range receiverFlags {
		if f == "--store-promise" && i+1 < len(receiverFlags) {
			p, err := store.ParsePromise(receiverFlags[i+1])
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, store.WithMinPromise(p))
		}
	}
	st, err := store.Open(ctx, dsn, opts...)
	if err != nil {
		t.Fatalf("opening the store %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// waitDelivered waits until the store's queue is empty (nothing pending, running or retryable:
// no delivery can follow) and the sink has processed every wanted event.
func waitDelivered(t testing.TB, st store.Store, s *sink, want, sent map[string]bool, timeout time.Duration) ledger {
	t.Helper()
	l, err := waitDrained(st, s, want, sent, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitDrained is waitDelivered without the test: after timeout it returns the last ledger and
// an error.
func waitDrained(st store.Store, s *sink, want, sent map[string]bool, timeout time.Duration) (ledger, error) {
	var l ledger
	err := poll(timeout, "the queue to drain and the sink to hold every event", func() (bool, string) {
		n, err := st.Depth(context.Background())
		if err != nil {
			return false, err.Error()
		}
		l = s.ledgerFor(want, sent)
		return n == 0 && len(l.missing) == 0, fmt.Sprintf("queue depth %d, %d of %d events missing at the sink (e.g. %v)",
			n, len(l.missing), len(want), first(l.missing, 3))
	})
	return l, err
}

// --- a private PostgreSQL ----------------------------------------------------------------------

// privatePostgres is a PostgreSQL server of one test, in a temporary directory. The postmaster
// is a direct child of the test process with a parent-death signal, so even a test binary
// killed by -timeout cannot leave it running.
type privatePostgres struct {
	t         testing.TB
	dir, data string
	port      int
	bin       string
	cred      *syscall.Credential // the postgres user's, when the test runs as root

	mu   sync.Mutex
	proc *child // the postmaster
}

func (p *privatePostgres) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// startPrivatePostgres runs initdb and postgres from /usr/lib/postgresql/*/bin (or PATH) on a
// free port. It fails the test when that is impossible under CI=true and skips it, loudly,
// elsewhere.
func startPrivatePostgres(t testing.TB) *privatePostgres {
	t.Helper()
	unavailable := func(format string, args ...any) {
		t.Helper()
		msg := "a private PostgreSQL cannot be started here: " + fmt.Sprintf(format, args...) +
			" (install the postgresql package: the test needs initdb and postgres)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, NOT PASSED: " + msg)
	}
	bin := ""
	if p, err := exec.LookPath("initdb"); err == nil {
		bin = filepath.Dir(p)
	} else if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) < versionOf(dirs[j]) })
		bin = dirs[len(dirs)-1]
	}
	if bin == "" {
		unavailable("no initdb on PATH or under /usr/lib/postgresql/*/bin")
	}
	for _, b := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			unavailable("%s: %v", b, err)
		}
	}
	dir, err := os.MkdirTemp("", "hookwarden-e2e-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &privatePostgres{t: t, dir: dir, data: filepath.Join(dir, "data"), bin: bin}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root: they run as "postgres", which owns dir.
		u, err := user.Lookup("postgres")
		if err != nil {
			unavailable("running as root and there is no postgres user: %v", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		unavailable("initdb: %v\n%s", err, out)
	}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	p.port, _ = strconv.Atoi(port)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "server.log")); err == nil {
				lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
				t.Logf("--- private PostgreSQL log (last lines):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	if err := p.Start(); err != nil {
		unavailable("%v", err)
	}
	return p
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start starts the server and waits until it accepts connections (crash recovery included).
func (p *privatePostgres) Start() error {
	// fsync=off: the test crashes the server process, not the machine, so what was written
	// survives in the page cache either way.
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data, "-p", strconv.Itoa(p.port),
		"-c", "listen_addresses=127.0.0.1", "-k", p.dir, "-c", "fsync=off")
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	proc, err := startChild(cmd, filepath.Join(p.dir, "server.log"), "")
	if err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	p.mu.Lock()
	p.proc = proc
	p.mu.Unlock()

	db, err := sql.Open("pgx", p.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if proc.exited() {
			return fmt.Errorf("postgres exited while starting (see %s/server.log): %v", p.dir, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 60s: %v", err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// StopImmediate stops the server the way `pg_ctl stop -m immediate` does (SIGQUIT to the
// postmaster: no checkpoint, crash recovery at the next start) and waits for it to exit.
func (p *privatePostgres) StopImmediate() error {
	proc := p.running()
	if err := proc.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return fmt.Errorf("stopping postgres: %w", err)
	}
	if !proc.wait(30 * time.Second) {
		return errors.New("postgres did not exit within 30s of SIGQUIT")
	}
	return nil
}

// kill ends the server and its backends, if running.
func (p *privatePostgres) kill() {
	proc := p.running()
	if proc == nil || proc.exited() {
		return
	}
	_ = proc.cmd.Process.Signal(syscall.SIGQUIT)
	if !proc.wait(10 * time.Second) {
		proc.killGroup()
		<-proc.done
	}
}

func (p *privatePostgres) running() *child {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc
}

// --- child processes -------------------------------------------------------------------------

// child is a started process. done is closed once it has exited, and err (its exit error) is
// set before that.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startChild starts cmd in its own process group, killed if the test process dies, with its
// output appended to logPath after header (unless empty).
func startChild(cmd *exec.Cmd, logPath, header string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if header != "" {
		fmt.Fprintln(logf, header)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		_ = logf.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait tells whether the process exits within timeout.
func (c *child) wait(timeout time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// killGroup sends SIGKILL to the process's group.
func (c *child) killGroup() { _ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL) }

// --- raw HTTP for in-flight requests -------------------------------------------------------------

// heldRequest is a delivery whose headers were sent with Expect: 100-continue and whose body is
// held back: once the receiver answers 100 Continue, its handler is running and reading.
type heldRequest struct {
	conn net.Conn
	br   *bufio.Reader
	body []byte
}

func holdRequest(t testing.TB, addr string, sub subscription, eventID string) *heldRequest {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	body := stripeEvent(eventID)
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		sub.path(), addr, stripe.SignatureHeader, stripe.SignHeader(sub.Secret, time.Now(), body), len(body))
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the interim response: %v", err)
	}
	if !strings.Contains(status, " 100 ") {
		t.Fatalf("want 100 Continue, got %q", strings.TrimSpace(status))
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the interim response: %v", err)
		}
		if line == "\r\n" {
			break
		}
	}
	return &heldRequest{conn: conn, br: br, body: body}
}

// Finish sends the body and reads the final status.
func (h *heldRequest) Finish() (int, error) {
	if _, err := h.conn.Write(h.body); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// counter is a concurrency-safe tally by label.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(label string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[label]++
}

func (c *counter) get(label string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[label]
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.m))
	for k := range c.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, c.m[k])
	}
	return strings.TrimSpace(b.String())
}

func statusLabel(a attempt) string {
	if a.err != nil {
		return "conn_error"
	}
	return strconv.Itoa(a.status)
}
