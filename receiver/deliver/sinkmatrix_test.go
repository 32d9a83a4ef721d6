package deliver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// sinkDowntime is how long scenario "down" keeps one sink's destination away.
const sinkDowntime = time.Minute

// Issue 30, "Tests with the real brokers": the sink scenarios run on every kind of sink, HTTP,
// NATS JetStream (embedded nats-server), Kafka (kfake) and RabbitMQ (the machine's), each
// kind's sinks on destinations of their own (sinkkinds_test.go). The kinds run at the same time,
// and within a kind "down" (a minute of downtime) beside the others: t.Parallel would hold
// them to -parallel, GOMAXPROCS (2 here), and the minutes would add up, so each runs in a
// goroutine of its own (t.Run may be called from several).
func TestSinkScenariosOnEveryKind(t *testing.T) {
	testtier.RequiresServers(t, "a NATS JetStream server, RabbitMQ and a minute of broker downtime")
	scenarios := []struct {
		name string
		run  func(*testing.T, string)
	}{
		{"fan-out", scenarioFanOut},
		{"order", scenarioOrder},
		{"misconfigured", scenarioMisconfigured},
	}
	var wg sync.WaitGroup
	for _, kind := range sinkKinds {
		wg.Go(func() {
			t.Run(kind, func(t *testing.T) {
				var down sync.WaitGroup
				down.Go(func() { t.Run("down", func(t *testing.T) { scenarioDown(t, kind) }) })
				for _, sc := range scenarios {
					t.Run(sc.name, func(t *testing.T) { sc.run(t, kind) })
				}
				down.Wait()
			})
		})
	}
	wg.Wait()
}

// kindRig is a sinkRig whose sinks are all of one kind, each on its own endpoint.
type kindRig struct {
	*sinkRig
	env *kindEnv
	eps map[string]endpoint
	// keys is how many order keys the events spread over (obj_0 ... ).
	keys int
	next int
	// key is each claimed event's order key.
	key map[string]string
}

func newKindRig(t *testing.T, kind string) *kindRig {
	t.Helper()
	k := &kindRig{env: newKindEnv(t, kind), eps: map[string]endpoint{}, keys: 2, key: map[string]string{}}
	// Retries a minute long stay a few dozen attempts per job.
	k.sinkRig = newSinkRig(t, Options{Workers: 4, PollInterval: 20 * time.Millisecond, Backoff: Backoff{Base: 50 * time.Millisecond, Max: time.Second}})
	return k
}

type sinkOpts struct {
	filter      string
	missing     bool
	orderBy     string
	maxAttempts int
}

// add configures sink name on an endpoint of its own.
func (k *kindRig) add(t *testing.T, name string, o sinkOpts) endpoint {
	t.Helper()
	ep := k.env.endpoint(t, name, o.missing)
	k.eps[name] = ep
	s := ep.sink()
	s.Name, s.OrderBy, s.MaxAttempts = name, o.orderBy, o.maxAttempts
	if o.filter != "" {
		s.Filter = mustFilter(t, o.filter)
	}
	k.set(name, func(c *Sink) { *c = s })
	return ep
}

func mustFilter(t *testing.T, expr string) *Filter {
	t.Helper()
	f, err := CompileFilter(expr)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// keyOf is the order key (data.object.id) of the i-th event.
func (k *kindRig) keyOf(i int) string { return fmt.Sprintf("obj_%d", i%k.keys) }

// claim records the next events of shop/orders, of types, for every sink of the rig (each
// with its order key when it orders), each with budget maxAttempts; it returns their ids.
func (k *kindRig) claim(t *testing.T, maxAttempts int, types ...string) []string {
	t.Helper()
	k.mu.Lock()
	sinks := slices.Sorted(maps.Keys(k.sinks))
	orderBy := map[string]string{}
	for name, s := range k.sinks {
		if s.OrderBy != "" {
			orderBy[name] = s.OrderBy
		}
	}
	k.mu.Unlock()
	var events []store.Event
	var ids []string
	for _, typ := range types {
		i := k.next
		k.next++
		id := fmt.Sprintf("evt_%03d", i)
		pad := ""
		if typ == poisonType {
			pad = `,"pad":"` + poisonPad + `"`
		}
		ev := store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: id, EventType: typ, ContentType: "application/json",
			Payload:    fmt.Appendf(nil, `{"id":%q,"type":%q,"data":{"object":{"id":%q}}%s}`, id, typ, k.keyOf(i), pad),
			ReceivedAt: time.Now(), MaxAttempts: maxAttempts, Sinks: sinks}
		for name, path := range orderBy {
			if ev.OrderKeys == nil {
				ev.OrderKeys = map[string]string{}
			}
			ev.OrderKeys[name] = OrderKey(path, ev)
		}
		events = append(events, ev)
		ids = append(ids, id)
		k.key[id] = k.keyOf(i)
	}
	if _, err := k.st.ClaimBatch(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	return ids
}

// distinct is the set of event ids sink's consumer got.
func (k *kindRig) distinct(t *testing.T, sink string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range k.eps[sink].received(t) {
		seen[c.id] = true
	}
	return seen
}

// hasAll reports whether sink's consumer got every one of ids.
func (k *kindRig) hasAll(t *testing.T, sink string, ids []string) bool {
	t.Helper()
	seen := k.distinct(t, sink)
	return !slices.ContainsFunc(ids, func(id string) bool { return !seen[id] })
}

func (k *kindRig) deadLetters(t *testing.T) []store.Job {
	t.Helper()
	letters, err := k.st.DeadLetters(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return letters
}

// await polls cond until it holds, for up to three minutes (brokers on a loaded box).
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	pollFor(t, 3*time.Minute, 20*time.Millisecond, what, cond)
}

// exactlyOnce reports whether the kind's destination takes each event once even through
// failures (HTTP here: a refused request is not taken; JetStream: it drops a repeated
// Nats-Msg-Id); Kafka and RabbitMQ are at least once, with the same key on every copy.
func exactlyOnce(kind string) bool { return kind == "http" || kind == "nats" }

// tally checks what each sink's consumer got against want (sink -> event ids): every event
// arrived, nothing else did, every copy carries the event's Idempotency-Key, and (strict, or
// the kind drops repeats) no event twice; it prints the scenario's REPORT line.
func (k *kindRig) tally(t *testing.T, scenario string, want map[string][]string, strict bool) {
	t.Helper()
	var published, acked, received, repeats, lost int
	var perSink []string
	for _, sink := range slices.Sorted(maps.Keys(want)) {
		n := map[string]int{}
		for _, c := range k.eps[sink].received(t) {
			n[c.id]++
			received++
			if wantKey := IdempotencyKey(store.Event{SubscriptionUID: "uid", EventID: c.id}); c.key != wantKey {
				t.Errorf("sink %s: a copy of %s carries key %q, want %q", sink, c.id, c.key, wantKey)
			}
		}
		sinkLost, sinkRepeats := 0, 0
		for _, id := range want[sink] {
			switch {
			case n[id] == 0:
				sinkLost++
			case n[id] > 1:
				sinkRepeats += n[id] - 1
			}
			delete(n, id)
		}
		if len(n) > 0 {
			t.Errorf("sink %s got events it should not have: %v", sink, slices.Sorted(maps.Keys(n)))
		}
		if sinkLost > 0 || (sinkRepeats > 0 && (strict || exactlyOnce(k.env.kind))) {
			t.Errorf("sink %s: %d of %d events lost, %d repeats", sink, sinkLost, len(want[sink]), sinkRepeats)
		}
		published += len(want[sink])
		acked += int(max(sinkCounter(t, k.reg, sink, ResultDelivered), 0))
		lost += sinkLost
		repeats += sinkRepeats
		perSink = append(perSink, fmt.Sprintf("%s %d", sink, len(want[sink])))
	}
	fmt.Printf("REPORT sinks %s %s: published %d (%s), acknowledged %d, consumers got %d, repeats %d (same key), lost %d\n",
		k.env.kind, scenario, published, strings.Join(perSink, ", "), acked, received, repeats, lost)
}

// a. Fan-out to three sinks with different filters: each consumer gets exactly the events its
// filter selects, once.
func scenarioFanOut(t *testing.T, kind string) {
	k := newKindRig(t, kind)
	k.add(t, "invoices", sinkOpts{filter: "type.startsWith('invoice.')"})
	k.add(t, "charges", sinkOpts{filter: "type.startsWith('charge.') && data.data.object.id != 'obj_0'"})
	k.add(t, "all", sinkOpts{})
	var types []string
	for i := range 30 {
		types = append(types, goodTypes[i%len(goodTypes)])
	}
	ids := k.claim(t, 3, types...)
	want := map[string][]string{"all": ids}
	for i, id := range ids {
		switch {
		case types[i] == "invoice.paid":
			want["invoices"] = append(want["invoices"], id)
		case types[i] == "charge.succeeded" && k.keyOf(i) != "obj_0":
			want["charges"] = append(want["charges"], id)
		}
	}
	k.run(t)
	await(t, "every job is done", func() bool { return k.depth(t) == 0 })
	k.tally(t, "fan-out", want, true)
	if letters := k.deadLetters(t); len(letters) != 0 {
		t.Errorf("%d dead letters, want none", len(letters))
	}
}

// b. One sink's destination away for a minute while events keep arriving: the two others get
// each batch meanwhile; the one that is down acknowledges nothing, and when it is back it
// catches up. Zero lost on every sink.
func scenarioDown(t *testing.T, kind string) {
	k := newKindRig(t, kind)
	sinks := []string{"steady", "also-up", "down"}
	for _, name := range sinks {
		k.add(t, name, sinkOpts{maxAttempts: 1_000_000})
	}
	ids := k.claim(t, 0, slices.Repeat([]string{"invoice.paid"}, 5)...)
	k.run(t)
	await(t, "every sink has the first events", func() bool {
		return k.hasAll(t, "steady", ids) && k.hasAll(t, "also-up", ids) && k.hasAll(t, "down", ids)
	})
	before := len(ids)
	k.eps["down"].down(t)
	for start := time.Now(); time.Since(start) < sinkDowntime; {
		ids = append(ids, k.claim(t, 0, goodTypes...)...)
		await(t, "the sinks that are up get the events that arrive while the third is down", func() bool {
			return k.hasAll(t, "steady", ids) && k.hasAll(t, "also-up", ids)
		})
		time.Sleep(5 * time.Second) // the pace at which events arrive, not a deadline
	}
	await(t, "the sinks that are up recorded every event as delivered", func() bool {
		return sinkCounter(t, k.reg, "steady", ResultDelivered) >= float64(len(ids)) && sinkCounter(t, k.reg, "also-up", ResultDelivered) >= float64(len(ids))
	})
	if got, d := sinkCounter(t, k.reg, "down", ResultDelivered), k.depth(t); got != float64(before) || d != len(ids)-before {
		t.Errorf("the sink that is down acknowledged %v events and %d jobs wait; want the %d before it went down and the %d since", got, d, before, len(ids)-before)
	}
	if got := sinkCounter(t, k.reg, "down", ResultRetry); got < 1 {
		t.Errorf("no failed attempt of the sink that is down")
	}
	k.eps["down"].up(t)
	await(t, "the sink that was down has caught up", func() bool { return k.depth(t) == 0 })
	want := map[string][]string{}
	for _, name := range sinks {
		want[name] = ids
	}
	k.tally(t, "down", want, false)
	if letters := k.deadLetters(t); len(letters) != 0 {
		t.Errorf("%d dead letters, want none", len(letters))
	}
}

// c. Ordering per key (data.object.id) held through retries and a dead letter: the poison event
// is refused on every attempt; while its budget lasts it holds back its own key alone, the
// other keys go on; the destination goes away mid-stream and comes back (retries); the sink's
// maxAttempts lowered, the poison is dead-lettered and releases its key, whose events then
// arrive in arrival order, as do the events after it.
func scenarioOrder(t *testing.T, kind string) {
	k := newKindRig(t, kind)
	k.keys = 3
	ep := k.add(t, "ordered", sinkOpts{orderBy: "data.data.object.id"})
	const budget = 1_000_000
	types := slices.Repeat(goodTypes, 3)
	types[4] = poisonType
	first := k.claim(t, budget, types...)
	poison := first[4]
	k.run(t)

	flowing, held := k.behind(first, poison)
	await(t, "the other keys' events, and the poison's key's before it, arrived", func() bool { return k.hasAll(t, "ordered", flowing) })
	await(t, "the poison was refused twice", func() bool { return k.retried(poison, 2) })
	k.noneArrived(t, held, "while the poison is retried")

	ep.down(t)
	second := k.claim(t, budget, slices.Repeat(goodTypes, 3)...)
	moreFlowing, moreHeld := k.behind(second, poison)
	// Of each key, only the oldest event not done is attempted.
	heads := map[string]string{}
	for _, id := range slices.Backward(moreFlowing) {
		heads[k.key[id]] = id
	}
	for _, id := range heads {
		await(t, id+" failed while the destination is away", func() bool { return k.retried(id, 1) })
	}
	ep.up(t)
	flowing, held = append(flowing, moreFlowing...), append(held, moreHeld...)
	await(t, "every event not behind the poison arrived", func() bool { return k.hasAll(t, "ordered", flowing) })
	await(t, "only the poison and its key's later events wait", func() bool { return k.depth(t) == len(held)+1 })
	k.noneArrived(t, held, "while the poison is retried")

	k.set("ordered", func(s *Sink) { s.MaxAttempts = 3 })
	await(t, "the poison is dead-lettered", func() bool { return len(k.deadLetters(t)) == 1 })
	third := k.claim(t, 3, slices.Repeat(goodTypes, 2)...)
	await(t, "every job is done", func() bool { return k.depth(t) == 0 })

	letters := k.deadLetters(t)
	// The poison had spent more than the lowered budget: its next failure was its last.
	if l := letters[0]; len(letters) != 1 || l.Event.EventID != poison || l.Sink != "ordered" || l.Attempt < 3 || !strings.Contains(l.LastError, "gave up after") {
		t.Errorf("dead letters: %d, the first %s of sink %s after %d attempts: %q; want only the poison %s, its budget spent", len(letters), l.Event.EventID, l.Sink, l.Attempt, l.LastError, poison)
	}
	all := slices.Concat(first, second, third)
	k.checkOrder(t, ep.received(t), slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == poison }))
	k.tally(t, "order", map[string][]string{"ordered": slices.DeleteFunc(all, func(id string) bool { return id == poison })}, false)
}

// behind splits ids into those not held back by poison and those of its key claimed after it.
func (k *kindRig) behind(ids []string, poison string) (flowing, held []string) {
	for _, id := range ids {
		switch {
		case id == poison:
		case k.key[id] == k.key[poison] && id > poison:
			held = append(held, id)
		default:
			flowing = append(flowing, id)
		}
	}
	return flowing, held
}

// retried reports whether the log shows at least n failed attempts of event id, to be retried.
func (k *kindRig) retried(id string, n int) bool {
	k.logs.mu.Lock()
	defer k.logs.mu.Unlock()
	for _, l := range k.logs.lines {
		if strings.Contains(l, "Delivery failed, will retry") && strings.Contains(l, `"eventID"="`+id+`"`) {
			if n--; n == 0 {
				return true
			}
		}
	}
	return false
}

func (k *kindRig) noneArrived(t *testing.T, ids []string, when string) {
	t.Helper()
	seen := k.distinct(t, "ordered")
	for _, id := range ids {
		if seen[id] {
			t.Errorf("%s arrived %s, before the event ahead of it on its key", id, when)
		}
	}
}

// checkOrder checks that, on each key, the copies arrived in claim order (a repeat right after
// its first copy, never after a later event of its key), and that the key's events are want's.
func (k *kindRig) checkOrder(t *testing.T, got []copyOf, want []string) {
	t.Helper()
	perKey, wantPerKey := map[string][]string{}, map[string][]string{}
	for _, c := range got {
		seq := perKey[k.key[c.id]]
		if len(seq) > 0 && c.id < seq[len(seq)-1] {
			t.Errorf("key %s: %s arrived after %s", k.key[c.id], c.id, seq[len(seq)-1])
		}
		perKey[k.key[c.id]] = append(seq, c.id)
	}
	for _, id := range want {
		wantPerKey[k.key[id]] = append(wantPerKey[k.key[id]], id)
	}
	for key, seq := range perKey {
		perKey[key] = slices.Compact(seq)
	}
	for key, seq := range wantPerKey {
		if !slices.Equal(perKey[key], seq) {
			t.Errorf("key %s arrived as %v, want %v", key, perKey[key], seq)
		}
	}
}

// d. A misconfigured sink (a filter that does not compile; for a broker, also a destination
// that does not exist): its events are offered more often than their budget and wait,
// uncounted; nothing is dead-lettered, the other sink is delivered; once fixed, every event
// arrives once.
func scenarioMisconfigured(t *testing.T, kind string) {
	k := newKindRig(t, kind)
	k.add(t, "ok", sinkOpts{})
	k.add(t, "badfilter", sinkOpts{})
	_, compileErr := CompileFilter("typ == 'invoice.paid'")
	if compileErr == nil {
		t.Fatal("a filter with a typo compiled")
	}
	k.set("badfilter", func(s *Sink) { s.Problem = compileErr.Error() })
	reasons := map[string]string{"badfilter": "sink badfilter cannot take events: filter does not compile"}
	if kind != "http" {
		reasons["nodest"] = k.add(t, "nodest", sinkOpts{missing: true}).misconfiguredLog()
	}
	ids := k.claim(t, 3, slices.Repeat(goodTypes, 2)...)
	k.run(t)

	await(t, "the sink that is fine has every event", func() bool { return k.hasAll(t, "ok", ids) })
	for name, reason := range reasons {
		await(t, name+"'s events were offered more often than their budget and given back, saying why", func() bool {
			if letters := k.deadLetters(t); len(letters) != 0 {
				t.Fatalf("%s's job of %s dead-lettered while the sink was misconfigured (%s), want it waiting", letters[0].Sink, letters[0].Event.EventID, letters[0].LastError)
			}
			return sinkCounter(t, k.reg, name, ResultReturned) >= float64(4*len(ids)) && k.logs.contains(reason)
		})
	}
	if letters := k.deadLetters(t); len(letters) != 0 {
		t.Fatalf("%d dead letters while sinks were misconfigured, want none: their events wait", len(letters))
	}
	if n := len(k.eps["badfilter"].received(t)); n != 0 {
		t.Errorf("the sink whose filter does not compile got %d events", n)
	}
	if d := k.depth(t); d != len(reasons)*len(ids) {
		t.Errorf("%d jobs wait, want the misconfigured sinks' %d", d, len(reasons)*len(ids))
	}

	k.set("badfilter", func(s *Sink) { s.Problem, s.Filter = "", mustFilter(t, "type != ''") })
	if ep, ok := k.eps["nodest"]; ok {
		ep.fix(t)
		fixed := ep.sink()
		k.set("nodest", func(s *Sink) { s.Publisher = fixed.Publisher })
	}
	await(t, "the fixed sinks have caught up", func() bool { return k.depth(t) == 0 })
	want := map[string][]string{}
	for name := range k.eps {
		want[name] = ids
	}
	k.tally(t, "misconfigured", want, true)
	if letters := k.deadLetters(t); len(letters) != 0 {
		t.Errorf("%d dead letters, want none", len(letters))
	}
}
