package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/providers/stripe"
)

const (
	burstSenders     = 8                // goroutines working through the burst
	sinkTimeout      = 20 * time.Second // longest wait for the sink to hold every event
	sinkSettle       = time.Second      // quiet time after the last event, to catch late repeats
	stripeUserAgent  = "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
	forgedEventID    = "evt_demo_forged"
	forgedSecret     = "whsec_demo_forged_not_the_endpoint_secret"
	modeOnce         = "once"
	modeConcurrent   = "concurrent"  // every copy at the same moment, from its own goroutine
	modeRedelivered  = "redelivered" // a second copy after the whole first pass, with a new t
	resultAccepted   = "accepted"
	resultDuplicate  = "duplicate"
	resultBadSig     = "bad_signature"
	resultNoEventID  = "no_event_id"
	routeProbeWindow = 20 * time.Second
)

// target is one subscription the burst delivers to.
type target struct {
	sub      subRef
	uid      string
	secret   string // the endpoint's signing secret, as the fake Stripe reports it
	endpoint string // its id
	path     string // /hooks/default/<name>
	sinkPath string // where the receiver must deliver its events
}

// burstEvent is one distinct event and how often, and how, it is sent.
type burstEvent struct {
	t      *target
	id     string
	body   []byte
	copies int
	mode   string
}

// answer is the receiver's reply to one delivery.
type answer struct {
	status int
	result string // the "result" of its JSON body
	err    error  // no reply
}

func (a answer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("%d %s", a.status, a.result)
}

// stripeSender posts signed deliveries to the receiver, as Stripe would.
type stripeSender struct {
	base string
	http *http.Client

	mu      sync.Mutex
	answers map[*burstEvent][]answer
	sent    int
}

func newStripeSender(base string) *stripeSender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * burstSenders * 3
	return &stripeSender{base: base, http: &http.Client{Timeout: 15 * time.Second, Transport: tr}, answers: map[*burstEvent][]answer{}}
}

// post sends body to path with a Stripe-Signature made with secret at the current time.
func (s *stripeSender) post(ctx context.Context, path, secret string, body []byte) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+path, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", stripeUserAgent)
	req.Header.Set(stripe.SignatureHeader, stripe.SignHeader(secret, time.Now(), body))
	resp, err := s.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return answer{err: fmt.Errorf("POST %s: %w", path, err)}
	}
	defer resp.Body.Close()
	var r struct {
		Result string `json:"result"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = json.Unmarshal(b, &r)
	return answer{status: resp.StatusCode, result: r.Result}
}

// deliver sends one copy of e and records the answer.
func (s *stripeSender) deliver(ctx context.Context, e *burstEvent) {
	a := s.post(ctx, e.t.path, e.t.secret, e.body)
	s.mu.Lock()
	s.answers[e] = append(s.answers[e], a)
	s.sent++
	s.mu.Unlock()
}

// concurrently sends n copies of e at the same moment, one goroutine each.
func (s *stripeSender) concurrently(ctx context.Context, e *burstEvent, n int) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-gate
			s.deliver(ctx, e)
		})
	}
	close(gate)
	wg.Wait()
}

// --- the step

// burst acts as Stripe: for every subscription with a sink it sends correctly signed deliveries
// of distinct events straight to the receiver, about 30 % of them duplicates (some concurrent,
// some later), then checks the answers, the sink (each event exactly once) and the receiver's
// metrics.
func (d *demo) burst(ctx context.Context) error {
	d.step("acting as Stripe: a burst of signed deliveries straight to the receiver (POST %s/hooks/%s/<name>)", d.receiverBase, namespace)
	targets, err := d.burstTargets(ctx)
	if err != nil {
		return err
	}
	sender := newStripeSender(d.receiverBase)
	if err := d.waitRoutes(ctx, sender, targets); err != nil {
		return err
	}
	before, _, err := d.requestCounts(ctx)
	if err != nil {
		return fmt.Errorf("reading the receiver's metrics: %w", err)
	}

	seed := d.opts.burstSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 0x686f6f6b))
	var events []*burstEvent
	for _, t := range targets {
		evs := planEvents(t, d.opts.burstEvents, rng)
		d.info("%s", describePlan(t, evs))
		events = append(events, evs...)
	}

	// Pass 1: every event once, or all its concurrent copies at once, in random order across the
	// subscriptions, burstSenders at a time. Pass 2: the redeliveries, each with a fresh t.
	started := time.Now()
	units := make(chan *burstEvent)
	var wg sync.WaitGroup
	for range burstSenders {
		wg.Go(func() {
			for e := range units {
				if e.mode == modeConcurrent {
					sender.concurrently(ctx, e, e.copies)
				} else {
					sender.deliver(ctx, e)
				}
			}
		})
	}
	order := rng.Perm(len(events))
	for _, i := range order {
		units <- events[i]
	}
	for _, i := range order {
		if e := events[i]; e.mode == modeRedelivered {
			units <- e
		}
	}
	close(units)
	wg.Wait()
	took := time.Since(started)
	if err := ctx.Err(); err != nil {
		return err
	}

	total, dups := sender.sent, sender.sent-len(events)
	d.info("sent %d deliveries of %d distinct events (%d duplicates, %.1f %%) in %s (%d senders, -burst-seed %d)",
		total, len(events), dups, 100*float64(dups)/float64(total), took.Round(10*time.Millisecond), burstSenders, seed)
	byStatus := map[int]int{}
	other := 0
	var wrong []string
	for _, e := range events {
		as := sender.answers[e]
		n202, n200 := 0, 0
		for _, a := range as {
			switch {
			case a.err == nil && a.status == http.StatusAccepted && a.result == resultAccepted:
				n202++
			case a.err == nil && a.status == http.StatusOK && a.result == resultDuplicate:
				n200++
			default:
				other++
			}
			if a.err == nil {
				byStatus[a.status]++
			}
		}
		if len(as) != e.copies || n202 != 1 || n200 != e.copies-1 {
			wrong = append(wrong, fmt.Sprintf("%s (%s, %d copies): %s", e.id, e.mode, e.copies, describeAnswers(as)))
		}
	}
	d.info("answers: %d × 202 accepted, %d × 200 duplicate, %d other%s", byStatus[http.StatusAccepted], byStatus[http.StatusOK], other, describeOther(byStatus))
	if len(wrong) > 0 {
		return fmt.Errorf("%d of %d events were not answered with exactly one 202 and a 200 for every other copy: %s",
			len(wrong), len(events), strings.Join(firstN(wrong, 5), "; "))
	}
	d.info("every event: exactly one 202; each other copy, concurrent or redelivered later, 200 duplicate")

	// A forgery: a fresh event signed with a secret that is not the endpoint's.
	t0 := targets[0]
	forged := sender.post(ctx, t0.path, forgedSecret, eventBody(forgedEventID, "invoice.paid", t0.sub.name))
	if forged.err != nil || forged.status != http.StatusUnauthorized || forged.result != resultBadSig {
		return fmt.Errorf("a delivery to %s signed with a wrong secret got %s, want 401 %s", t0.path, forged, resultBadSig)
	}
	d.info("forged: %s to %s signed with a wrong secret → %d {\"result\":%q}", forgedEventID, t0.path, forged.status, forged.result)

	if err := d.checkSink(ctx, targets, events, started); err != nil {
		return err
	}
	d.burstEvents, d.burstSent = len(events), total
	return d.showReceiverMetrics(ctx, before, map[string]int{
		resultAccepted: len(events), resultDuplicate: dups, resultBadSig: 1,
	})
}

// burstTargets returns the subscriptions with a sink, with what a delivery to each needs.
func (d *demo) burstTargets(ctx context.Context) ([]*target, error) {
	var out []*target
	for _, s := range d.subs {
		if s.sink == "" {
			d.info("%s: no spec.delivery.sink, skipped", s.name)
			continue
		}
		ep := d.endpoints[s.name]
		if ep.Secret == "" {
			return nil, fmt.Errorf("the fake reports no signing secret for %s's endpoint %s", s.name, ep.ID)
		}
		sub, err := d.getSub(ctx, s.name)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(s.sink)
		if err != nil {
			return nil, err
		}
		out = append(out, &target{sub: s, uid: string(sub.UID), secret: ep.Secret, endpoint: ep.ID,
			path: "/hooks/" + namespace + "/" + s.name, sinkPath: u.Path})
	}
	if len(out) == 0 {
		return nil, errors.New("no sample declares spec.delivery.sink: nothing for the receiver to deliver to")
	}
	return out, nil
}

// waitRoutes waits until the receiver verifies deliveries of every target with its signing
// secret. The probe is a correctly signed body without an event id: the receiver answers 404
// while it does not know the subscription, 401 bad_signature while it lacks the secret, and
// 401 no_event_id once the signature verifies. Nothing is recorded or delivered.
func (d *demo) waitRoutes(ctx context.Context, s *stripeSender, targets []*target) error {
	started := time.Now()
	probe := []byte(`{"object":"event","type":"demo.route_probe"}`)
	err := poll(ctx, routeProbeWindow, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := d.rcv.exited(); err != nil {
			return false, fatal(err)
		}
		for _, t := range targets {
			a := s.post(ctx, t.path, t.secret, probe)
			if a.err != nil || a.status != http.StatusUnauthorized || a.result != resultNoEventID {
				return false, fmt.Errorf("%s: probe answered %s", t.sub.name, a)
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the receiver to verify deliveries with the signing secrets: %w", err)
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.sub.name
	}
	d.info("the receiver verifies %s with their signing secrets (probe: a signed body without an event id → 401 %s) after %s",
		strings.Join(names, ", "), resultNoEventID, time.Since(started).Round(time.Millisecond))
	return nil
}

// planEvents makes n distinct events for t: about a third more copies than events (≈ 30 % of
// all deliveries are duplicates): n/8 events sent three times at once, the other duplicated
// events twice, half of them at once and half redelivered after the first pass.
func planEvents(t *target, n int, rng *rand.Rand) []*burstEvent {
	extra := int(math.Round(float64(n) * 3 / 7))
	triples := min(n/8, extra/2)
	doubles := min(extra-2*triples, n-triples)
	types := t.sub.events
	if len(types) == 0 || (len(types) == 1 && types[0] == "*") {
		types = []string{"invoice.paid"}
	}
	events := make([]*burstEvent, n)
	for i := range events {
		id := fmt.Sprintf("evt_demo_%s_%02d", t.sub.name, i+1)
		events[i] = &burstEvent{t: t, id: id, body: eventBody(id, types[i%len(types)], t.sub.name), copies: 1, mode: modeOnce}
	}
	perm := rng.Perm(n)
	for k, i := range perm[:triples+doubles] {
		e := events[i]
		switch {
		case k < triples:
			e.copies, e.mode = 3, modeConcurrent
		case (k-triples)%2 == 0:
			e.copies, e.mode = 2, modeConcurrent
		default:
			e.copies, e.mode = 2, modeRedelivered
		}
	}
	return events
}

// eventBody is a Stripe event as Stripe would send it: the same bytes on every copy.
func eventBody(id, typ, sub string) []byte {
	obj := "in_demo_" + strings.TrimPrefix(id, "evt_demo_")
	b, _ := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": "2023-10-16", "created": time.Now().Unix(), "livemode": false,
		"pending_webhooks": 1, "type": typ,
		"request": map[string]any{"id": nil, "idempotency_key": nil},
		"data":    map[string]any{"object": map[string]any{"id": obj, "object": "demo", "description": "hookwarden demo (" + sub + ")"}},
	})
	return b
}

func describePlan(t *target, events []*burstEvent) string {
	count := map[string]int{}
	sends := 0
	for _, e := range events {
		count[fmt.Sprintf("%s%d", e.mode, e.copies)]++
		sends += e.copies
	}
	return fmt.Sprintf("%s: %d events (%s), %d deliveries: %d once, %d three times at once, %d twice at once, %d twice (again after the first pass); signed with endpoint %s's secret",
		t.sub.name, len(events), strings.Join(t.sub.events, ", "), sends, count[modeOnce+"1"], count[modeConcurrent+"3"], count[modeConcurrent+"2"], count[modeRedelivered+"2"], t.endpoint)
}

func describeAnswers(as []answer) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func describeOther(byStatus map[int]int) string {
	var parts []string
	for code, n := range byStatus {
		if code != http.StatusAccepted && code != http.StatusOK {
			parts = append(parts, fmt.Sprintf("%d × %d", n, code))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}

// checkSink waits (bounded) until the sink holds every event, waits a little longer for late
// repeats, and checks that each event arrived exactly once, under the right headers and path,
// and that nothing else (the forgery) did.
func (d *demo) checkSink(ctx context.Context, targets []*target, events []*burstEvent, started time.Time) error {
	want := map[string]*burstEvent{} // Idempotency-Key → event
	for _, e := range events {
		want[e.t.uid+":"+e.id] = e
	}
	d.info("sink: waiting for all %d events (timeout %s) ...", len(want), sinkTimeout)
	var v sinkView
	err := poll(ctx, sinkTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := d.rcv.exited(); err != nil {
			return false, fatal(err)
		}
		v = d.sink.view()
		var missing []string
		for k, e := range want {
			if _, ok := v.byKey[k]; !ok {
				missing = append(missing, e.id)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return false, fmt.Errorf("the sink holds %d of %d events (%d deliveries); missing: %s",
				len(want)-len(missing), len(want), v.deliveries, strings.Join(firstN(missing, 5), ", "))
		}
		return true, nil
	})
	if err != nil {
		d.showDeadLetters()
		return fmt.Errorf("waiting for the sink: %w", err)
	}
	allIn := v.last.Sub(started)
	// Anything still to come (a repeat) arrives within a few retry periods.
	for {
		quiet := time.Since(d.sink.view().last)
		if quiet >= sinkSettle {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sinkSettle - quiet):
		}
	}
	v = d.sink.view()

	var problems []string
	problems = append(problems, v.problems...)
	perSub := map[string]int{}
	for k, got := range v.byKey {
		e, ok := want[k]
		if !ok {
			problems = append(problems, fmt.Sprintf("unexpected delivery: Idempotency-Key %q, ce-id %q (%d×)", k, got.ceID, got.count))
			continue
		}
		switch {
		case got.ceID != e.id || got.bodyID != e.id:
			problems = append(problems, fmt.Sprintf("%s: ce-id %q, payload id %q", k, got.ceID, got.bodyID))
		case got.source != "hookwarden/"+namespace+"/"+e.t.sub.name:
			problems = append(problems, fmt.Sprintf("%s: ce-source %q", e.id, got.source))
		case got.path != e.t.sinkPath:
			problems = append(problems, fmt.Sprintf("%s: delivered to %s, want %s", e.id, got.path, e.t.sinkPath))
		}
		perSub[subscriptionOf(got.source)] += got.count
	}
	for k, n := range v.byCEID {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("ce-id %s delivered %d times", k, n))
		}
	}
	repeated := v.repeated()
	dupDeliveries := v.deliveries - len(v.byKey)
	parts := make([]string, len(targets))
	for i, t := range targets {
		parts[i] = fmt.Sprintf("%s %d", t.sub.name, perSub[t.sub.name])
	}
	d.info("sink: %d distinct events, %d deliveries, %d duplicates (%s); the last event arrived %s after the burst began, nothing more in the %s after it",
		len(v.byKey), v.deliveries, dupDeliveries, strings.Join(parts, ", "), allIn.Round(10*time.Millisecond), sinkSettle)
	if len(repeated) > 0 {
		return fmt.Errorf("the sink received %d events more than once: %s", len(repeated), strings.Join(firstN(repeated, 5), "; "))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the sink's deliveries are wrong: %s", strings.Join(firstN(problems, 5), "; "))
	}
	if v.deliveries != len(want) {
		return fmt.Errorf("the sink received %d deliveries, want %d (one per event)", v.deliveries, len(want))
	}
	d.info("each event exactly once, with Idempotency-Key <subscription uid>:<event id>, ce-id = the event id, ce-source hookwarden/%s/<name>, on its subscription's sink path; the forgery never arrived", namespace)
	return nil
}

// showReceiverMetrics prints hookwarden_receiver_requests_total and checks that it grew by
// exactly want since before.
func (d *demo) showReceiverMetrics(ctx context.Context, before, want map[string]int) error {
	after, lines, err := d.requestCounts(ctx)
	if err != nil {
		return fmt.Errorf("reading the receiver's metrics: %w", err)
	}
	d.info("receiver metrics (GET %s/metrics | grep %s):", d.receiverMetrics.base, requestsMetric)
	for _, l := range lines {
		d.info("  %s", l)
	}
	var growth, wrong []string
	for _, r := range sortedKeys(merge(after, want)) {
		delta := after[r] - before[r]
		if delta != 0 {
			growth = append(growth, fmt.Sprintf("+%d %s", delta, r))
		}
		if delta != want[r] {
			wrong = append(wrong, fmt.Sprintf("%s grew by %d, want %d", r, delta, want[r]))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%s does not match the answers: %s", requestsMetric, strings.Join(wrong, "; "))
	}
	d.info("during the burst: %s — as answered (the route probes before it count as %s)", strings.Join(growth, ", "), resultNoEventID)
	return nil
}

func merge(a, b map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// showDeadLetters prints what `receiver dead-letters` lists (on a sink failure).
func (d *demo) showDeadLetters() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	args := []string{"dead-letters", "--store", "sqlite://" + d.receiverStore, "--limit", "10"}
	out, err := exec.CommandContext(ctx, filepath.Join(d.opts.binDir, "receiver"), args...).CombinedOutput()
	d.info("receiver %s:", strings.Join(args, " "))
	if err != nil {
		d.info("  (%v)", err)
	}
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		d.info("  %s", l)
	}
}
