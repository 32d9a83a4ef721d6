package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// The stack's two routes: Stripe reads the event id and type from the JSON body, GitHub from
// headers, so between them every place a hostile sender can put an id is covered.
const (
	stripePath   = "/hooks/shop/orders"
	stripeSource = "hookwarden/shop/orders"
	stripeUID    = "uid-orders"
	githubPath   = "/hooks/shop/repos"
	githubSource = "hookwarden/shop/repos"
	githubUID    = "uid-repos"
	// A second GitHub subscription: an organization hook beside the repository's.
	orgPath     = "/hooks/shop/org"
	orgSource   = "hookwarden/shop/org"
	orgUID      = "uid-org"
	stackSecret = "whsec_stack_0123456789abcdef"
)

// stack is one whole receiver on a real store: the handler (also behind a real HTTP server),
// the Batcher, the delivery pool and a sink that records what arrives.
type stack struct {
	kind    string // one of storeKinds
	st      store.Store
	claims  *claimLog
	handler http.Handler
	srv     *httptest.Server
	sink    *recordingSink
	now     time.Time // the handler's clock; deliveries are signed at it
}

// storeKinds are the stores the hostile-delivery tests run on.
var storeKinds = []string{"sqlite", "postgres", "redis"}

// claimLog is the stack's store with a record of every claim batch: which event ids were
// committed together.
type claimLog struct {
	store.Store
	mu      sync.Mutex
	batches [][]string
}

// Writers passes the store's committer count on to the Batcher.
func (c *claimLog) Writers() int {
	if w, ok := c.Store.(interface{ Writers() int }); ok {
		return w.Writers()
	}
	return 1
}

func (c *claimLog) record(events []store.Event) {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.EventID
	}
	c.mu.Lock()
	c.batches = append(c.batches, ids)
	c.mu.Unlock()
}

func (c *claimLog) ClaimBatch(ctx context.Context, events []store.Event) ([]bool, error) {
	c.record(events)
	return c.Store.ClaimBatch(ctx, events)
}

// claimLogEach is claimLog on a store that answers each claim on its own (Redis), so that the
// Batcher still sees it as one.
type claimLogEach struct {
	*claimLog
	each store.EachClaimer
}

func (c claimLogEach) ClaimEach(ctx context.Context, events []store.Event) []store.ClaimResult {
	c.record(events)
	return c.each.ClaimEach(ctx, events)
}

// batchesWith counts the ClaimBatch calls that held id.
func (c *claimLog) batchesWith(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.batches {
		if slices.Contains(b, id) {
			n++
		}
	}
	return n
}

// newStack builds a stack on a fresh SQLite file, PostgreSQL database or Redis server
// (appendfsync always: the store's strict promise).
func newStack(t testing.TB, kind string) *stack {
	t.Helper()
	var dsn string
	switch kind {
	case "sqlite":
		dsn = "sqlite://" + storetest.SQLitePath(t)
	case "postgres":
		dsn = storetest.PostgresDSN(t)
	case "redis":
		dsn = storetest.StartRedis(t, storetest.DurableRedis()...).URL()
	}
	return newStackOn(t, kind, dsn)
}

func newStackOn(t testing.TB, kind, dsn string) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open %s store: %v", kind, err)
	}
	s := &stack{kind: kind, st: st, claims: &claimLog{Store: st}, sink: newRecordingSink(), now: time.Now().Truncate(time.Second)}
	s.sink.srv = httptest.NewServer(s.sink)

	routes := receiver.NewRoutes()
	for _, r := range []receiver.Route{
		{Namespace: "shop", Name: "orders", UID: stripeUID, Provider: "stripe"},
		{Namespace: "shop", Name: "repos", UID: githubUID, Provider: "github"},
		{Namespace: "shop", Name: "org", UID: orgUID, Provider: "github"},
	} {
		r.Secrets, r.Sinks, r.MaxAttempts, r.DedupeWindow = [][]byte{[]byte(stackSecret)}, receiver.OneHTTPSink(s.sink.srv.URL), 3, time.Hour
		routes.Set(r)
	}
	var claims store.Store = s.claims
	if each, ok := st.(store.EachClaimer); ok {
		claims = claimLogEach{s.claims, each}
	}
	batcher := store.NewBatcher(claims, store.BatcherOptions{})
	h := &receiver.Handler{
		Routes:    routes,
		Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier(), "github": github.NewVerifier()},
		Claims:    batcher, MaxBody: 64 << 10, ClaimTimeout: 10 * time.Second,
		Metrics: receiver.NewMetrics(prometheus.NewRegistry()), Log: logr.Discard(), Now: func() time.Time { return s.now },
	}
	s.handler = h.Mux()
	s.srv = httptest.NewServer(s.handler)

	resolve := routes.Resolve
	// Retries a few milliseconds apart: an undeliverable event is dead within the test.
	pool := deliver.New(st, deliver.NewSender(deliver.SenderOptions{Timeout: 5 * time.Second}), resolve, deliver.Options{
		Workers: 8, PollInterval: 100 * time.Millisecond, Wake: batcher.Committed(),
		Backoff: deliver.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}, Logger: logr.Discard(),
	})
	runCtx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- pool.Run(runCtx) }()
	t.Cleanup(func() {
		s.srv.Close()
		stop()
		if err := <-ran; err != nil {
			t.Errorf("pool: %v", err)
		}
		batcher.Close()
		s.sink.srv.Close()
		_ = st.Close()
	})
	return s
}

// delivery is one signed request to the stack, and the event id and type its verifier reads
// from it.
type delivery struct {
	path, source, uid string
	header            http.Header
	body              []byte
	id, typ           string
}

// stripeDelivery carries id and type in a Stripe event body, the raw bytes written into the
// JSON strings as they are (escaped only where JSON requires it), so the verifier decodes
// them as encoding/json does: invalid UTF-8 becomes U+FFFD, \u0000 a NUL.
func stripeDelivery(now time.Time, id, typ, data []byte) delivery {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeJSONString(&b, id)
	b.WriteString(`,"object":"event","type":`)
	writeJSONString(&b, typ)
	b.WriteString(`,"data":{"object":`)
	writeJSONString(&b, data)
	b.WriteString(`}}`)
	body := b.Bytes()
	var v struct{ ID, Type string }
	_ = json.Unmarshal(body, &v)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Stripe-Signature", stripe.SignHeader(stackSecret, now, body))
	return delivery{path: stripePath, source: stripeSource, uid: stripeUID, header: h, body: body, id: v.ID, typ: v.Type}
}

func writeJSONString(b *bytes.Buffer, s []byte) {
	b.WriteByte('"')
	for _, c := range s {
		if c < 0x20 || c == '"' || c == '\\' {
			fmt.Fprintf(b, `\u%04x`, c)
		} else {
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// githubDelivery carries id and type in GitHub's headers, byte for byte, and body as it is.
func githubDelivery(id, typ string, body []byte) delivery {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(github.SignatureHeader, github.Sign([]byte(stackSecret), body))
	h.Set(github.DeliveryHeader, id)
	if typ != "" {
		h.Set(github.EventHeader, typ)
	}
	return delivery{path: githubPath, source: githubSource, uid: githubUID, header: h, body: body, id: h.Get(github.DeliveryHeader), typ: typ}
}

// answer is the receiver's response to one delivery.
type answer struct {
	status int
	result string
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, a.result) }

func (a answer) acked() bool { return a.status >= 200 && a.status < 300 }

// wire is the answer as the provider saw it: status and body.
func (a answer) wire() string { return fmt.Sprintf(`%d {"result":%q}`, a.status, a.result) }

// eventually polls cond until it holds, failing the test after 15 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readAnswer(status int, body io.Reader) answer {
	var v struct{ Result string }
	_ = json.NewDecoder(body).Decode(&v)
	return answer{status: status, result: v.Result}
}

// post sends d over real HTTP (header values must then be ones net/http sends).
func (s *stack) post(t testing.TB, d delivery) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+d.path, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = d.header.Clone()
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", d.path, err)
	}
	defer resp.Body.Close()
	return readAnswer(resp.StatusCode, resp.Body)
}

// serve hands d to the handler directly, so header values can hold any bytes at all.
func (s *stack) serve(d delivery) answer {
	req := httptest.NewRequest(http.MethodPost, d.path, bytes.NewReader(d.body))
	req.Header = d.header.Clone()
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	return readAnswer(rec.Code, rec.Body)
}

// arrival is one request the sink received, its CloudEvents headers percent-decoded.
type arrival struct {
	id, typ, key string
	body         []byte
}

// recordingSink answers 204 to every delivery and records it by ce-source and decoded ce-id.
type recordingSink struct {
	srv      *httptest.Server
	mu       sync.Mutex
	got      map[string][]arrival
	problems []string
	changed  chan struct{} // closed and replaced on every arrival
}

func newRecordingSink() *recordingSink {
	return &recordingSink{got: map[string][]arrival{}, changed: make(chan struct{})}
}

func sinkKey(source, id string) string { return source + "\x00" + id }

func (s *recordingSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	// The CloudEvents HTTP binding's decoding: one round of percent-decoding.
	decode := func(name string) string {
		v, err := url.PathUnescape(r.Header.Get(name))
		if err != nil {
			s.mu.Lock()
			s.problems = append(s.problems, fmt.Sprintf("%s %q does not percent-decode: %v", name, r.Header.Get(name), err))
			s.mu.Unlock()
		}
		return v
	}
	a := arrival{id: decode("ce-id"), typ: decode("ce-type"), key: decode("Idempotency-Key"), body: body}
	s.mu.Lock()
	k := sinkKey(r.Header.Get("ce-source"), a.id)
	s.got[k] = append(s.got[k], a)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *recordingSink) arrivals(source, id string) []arrival {
	got, _ := s.arrivalsOrWait(source, id)
	return got
}

// arrivalsOrWait returns what arrived for (source, id) and a channel closed on the next arrival.
func (s *recordingSink) arrivalsOrWait(source, id string) ([]arrival, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[sinkKey(source, id)], s.changed
}

// outcome waits until d's event reached the sink or was dead-lettered, and returns what the
// sink received and the dead letter's error. It wakes on arrivals, and looks for the dead
// letter every 100 ms.
func (s *stack) outcome(t testing.TB, d delivery, timeout time.Duration) ([]arrival, string) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got, changed := s.sink.arrivalsOrWait(d.source, d.id)
		if len(got) > 0 {
			return got, ""
		}
		select {
		case <-changed:
		case <-tick.C:
			if dead := s.deadLetter(t, d); dead != "" {
				return nil, dead
			}
		case <-deadline:
			return nil, s.deadLetter(t, d)
		}
	}
}

func (s *stack) deadLetter(t testing.TB, d delivery) string {
	t.Helper()
	dead, err := s.st.DeadLetters(context.Background(), 1000)
	if err != nil {
		t.Errorf("DeadLetters: %v", err) // not Fatal: the fuzz target calls this off the test goroutine
		return ""
	}
	sub := strings.TrimPrefix(d.source, "hookwarden/")
	for _, j := range dead {
		if j.Event.Subscription == sub && j.Event.EventID == d.id {
			return j.LastError
		}
	}
	return ""
}

// checkDelivered fails unless d's event reached the sink exactly once, carrying the id, type,
// Idempotency-Key and body the provider sent.
func (s *stack) checkDelivered(t testing.TB, d delivery) {
	t.Helper()
	got, dead := s.outcome(t, d, 15*time.Second)
	switch {
	case dead != "":
		t.Errorf("%s: acknowledged event %q was dead-lettered: %s", s.kind, d.id, dead)
		return
	case len(got) != 1:
		t.Errorf("%s: acknowledged event %q reached the sink %d times, want once", s.kind, d.id, len(got))
		return
	}
	a, typ := got[0], d.typ
	if typ == "" {
		typ = deliver.DefaultEventType
	}
	if a.typ != typ || a.key != d.uid+":"+d.id || !bytes.Equal(a.body, d.body) {
		t.Errorf("%s: event %q arrived as ce-type %q, Idempotency-Key %q, %d-byte body; want %q, %q, the %d bytes sent",
			s.kind, d.id, a.typ, a.key, len(a.body), typ, d.uid+":"+d.id, len(d.body))
	}
}

func (s *stack) depth(t testing.TB) int {
	t.Helper()
	n, err := s.st.Depth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
