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
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	burstSenders     = 8                // goroutines working through the burst
	sinkTimeout      = 20 * time.Second // longest wait for the sink to hold every event
	sinkSettle       = time.Second      // quiet time after the last event, to catch late repeats
	forgedSecret     = "demo_forged_not_the_registration_secret"
	modeOnce         = "once"
	modeConcurrent   = "concurrent"  // every copy at the same moment, from its own goroutine
	modeRedelivered  = "redelivered" // a second copy after the whole first pass (Stripe: signed with a new t)
	resultAccepted   = "accepted"
	resultDuplicate  = "duplicate"
	resultBadSig     = "bad_signature"
	resultNoEventID  = "no_event_id"
	routeProbeWindow = 20 * time.Second
)

// target is one subscription the burst delivers to, as its provider.
type target struct {
	p        provider
	sub      subRef
	uid      string
	reg      registration // its registration, whose secret signs the deliveries
	path     string       // /hooks/default/<name>
	sinkPath string       // where the receiver must deliver its events
}

// burstEvent is one distinct event and how often, and how, it is sent.
type burstEvent struct {
	t *target
	delivery
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

// sender posts signed deliveries to the receiver, as each target's provider would.
type sender struct {
	base string
	http *http.Client

	mu      sync.Mutex
	answers map[*burstEvent][]answer
	sent    int
}

func newSender(base string) *sender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * burstSenders * 3
	return &sender{base: base, http: &http.Client{Timeout: 15 * time.Second, Transport: tr}, answers: map[*burstEvent][]answer{}}
}

// post sends d to t's route with the headers t's provider sends, signed with secret.
func (s *sender) post(ctx context.Context, t *target, secret string, d delivery) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+t.path, bytes.NewReader(d.body))
	if err != nil {
		return answer{err: err}
	}
	t.p.sign(req.Header, d, secret, t)
	resp, err := s.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return answer{err: fmt.Errorf("POST %s: %w", t.path, err)}
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
func (s *sender) deliver(ctx context.Context, e *burstEvent) {
	a := s.post(ctx, e.t, e.t.reg.secret, e.delivery)
	s.mu.Lock()
	s.answers[e] = append(s.answers[e], a)
	s.sent++
	s.mu.Unlock()
}

// concurrently sends n copies of e at the same moment, one goroutine each.
func (s *sender) concurrently(ctx context.Context, e *burstEvent, n int) {
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

// burst acts as each subscription's provider: for every subscription with a sink it sends
// correctly signed deliveries of distinct events straight to the receiver, about 30 % of them
// duplicates (some concurrent, some later), mixing the subscriptions, then checks the answers,
// a forgery per provider, the sink (each event exactly once) and the receiver's metrics.
//
//nolint:funlen // the demo's story, step by step, as it prints it
func (d *demo) burst(ctx context.Context) error {
	var titles []string
	for _, p := range d.providers {
		titles = append(titles, p.fake().title)
	}
	d.step("acting as %s: a burst of signed deliveries straight to the receiver (POST %s/hooks/%s/<name>)", strings.Join(titles, " and "), d.receiverBase, namespace)
	targets, err := d.burstTargets(ctx)
	if err != nil {
		return err
	}
	sender := newSender(d.receiverBase)
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
	// subscriptions, burstSenders at a time. Pass 2: the redeliveries, each signed afresh.
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

	// A forgery per provider: a fresh event signed with a secret that is not the registration's.
	forgeries := 0
	for _, p := range d.providers {
		i := slices.IndexFunc(targets, func(t *target) bool { return t.p == p })
		if i < 0 {
			continue
		}
		t := targets[i]
		f := p.event(p.eventID("forged", 1, rng), p.eventTypes(t.sub.events)[0], t.sub)
		forged := sender.post(ctx, t, forgedSecret, f)
		if forged.err != nil || forged.status != http.StatusUnauthorized || forged.result != resultBadSig {
			return fmt.Errorf("a %s delivery to %s signed with a wrong secret got %s, want 401 %s", p.fake().title, t.path, forged, resultBadSig)
		}
		forgeries++
		d.info("forged as %s: event %s to %s signed with a wrong secret → %d {\"result\":%q}", p.fake().title, f.id, t.path, forged.status, forged.result)
	}

	if err := d.checkSink(ctx, targets, events, started); err != nil {
		return err
	}
	if err := d.checkFanOut(ctx, targets, events); err != nil {
		return err
	}
	d.burstEvents, d.burstSent = len(events), total
	return d.showReceiverMetrics(ctx, before, map[string]int{
		resultAccepted: len(events), resultDuplicate: dups, resultBadSig: forgeries,
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
		p := d.providerOf(s)
		reg := p.fake().regs[s.name]
		if reg.secret == "" {
			return nil, fmt.Errorf("the fake %s reports no signing secret for %s's %s %s", p.fake().title, s.name, reg.noun, reg.id)
		}
		sub, err := d.getSub(ctx, s.name)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(s.sink)
		if err != nil {
			return nil, err
		}
		out = append(out, &target{p: p, sub: s, uid: string(sub.UID), reg: reg, path: "/hooks/" + namespace + "/" + s.name, sinkPath: u.Path})
	}
	if len(out) == 0 {
		return nil, errors.New("no sample declares spec.delivery.sink: nothing for the receiver to deliver to")
	}
	return out, nil
}

// waitRoutes waits until the receiver verifies deliveries of every target with its signing
// secret. The probe is a correctly signed delivery without an event id: the receiver answers
// 404 while it does not know the subscription, 401 bad_signature while it lacks the secret,
// and 401 no_event_id once the signature verifies. Nothing is recorded or delivered.
func (d *demo) waitRoutes(ctx context.Context, s *sender, targets []*target) error {
	started := time.Now()
	err := poll(ctx, routeProbeWindow, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := d.rcv.Exited(); err != nil {
			return false, fatal(err)
		}
		for _, t := range targets {
			a := s.post(ctx, t, t.reg.secret, t.p.probe())
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
	types := t.p.eventTypes(t.sub.events)
	events := make([]*burstEvent, n)
	for i := range events {
		id := t.p.eventID(t.sub.name, i+1, rng)
		events[i] = &burstEvent{t: t, delivery: t.p.event(id, types[i%len(types)], t.sub), copies: 1, mode: modeOnce}
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

func describePlan(t *target, events []*burstEvent) string {
	count := map[string]int{}
	sends := 0
	for _, e := range events {
		count[fmt.Sprintf("%s%d", e.mode, e.copies)]++
		sends += e.copies
	}
	return fmt.Sprintf("%s (%s): %d events (%s), %d deliveries: %d once, %d three times at once, %d twice at once, %d twice (again after the first pass); signed with %s %s's secret",
		t.sub.name, t.p.fake().title, len(events), strings.Join(t.p.eventTypes(t.sub.events), ", "), sends, count[modeOnce+"1"], count[modeConcurrent+"3"], count[modeConcurrent+"2"], count[modeRedelivered+"2"], t.reg.noun, t.reg.id)
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
//
//nolint:funlen // each check says what the demo proves, in order
func (d *demo) checkSink(ctx context.Context, targets []*target, events []*burstEvent, started time.Time) error {
	want := map[string]*burstEvent{} // Idempotency-Key → event
	for _, e := range events {
		want[e.t.uid+":"+e.id] = e
	}
	d.info("sink: waiting for all %d events (timeout %s) ...", len(want), sinkTimeout)
	var v sinkView
	err := poll(ctx, sinkTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := d.rcv.Exited(); err != nil {
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
		case got.ceID != e.id:
			problems = append(problems, fmt.Sprintf("%s: ce-id %q", k, got.ceID))
		case got.ceType != e.typ:
			problems = append(problems, fmt.Sprintf("%s: ce-type %q, want %q", e.id, got.ceType, e.typ))
		case got.bodySum != bodySum(e.body):
			problems = append(problems, fmt.Sprintf("%s: the body delivered is not the body sent", e.id))
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
	d.info("each event exactly once, with the body sent, Idempotency-Key <subscription uid>:<event id>, ce-id = the event id, ce-type = its type, ce-source hookwarden/%s/<name>, on its subscription's sink path; no forgery arrived", namespace)
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
