package main_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/testtier"
)

// The small run is part of make test; `make chaos-receiver` runs the full one
// (-chaos.duration=3m).
var (
	chaosDuration = flag.Duration("chaos.duration", 25*time.Second, "TestChaos: how long the load and the kills last")
	chaosSeed     = flag.Uint64("chaos.seed", 0, "TestChaos: seed of the kill schedule, the duplicates and the sink's failures (0: from the clock)")
	chaosRate     = flag.Int("chaos.rate", 150, "TestChaos: deliveries per second the provider starts, at most")
)

const (
	chaosReplicas   = 3
	chaosClients    = 16   // concurrent provider connections
	chaosDupRate    = 0.30 // share of deliveries that repeat a recent event
	chaosRecent     = 64   // half the duplicates repeat one of this many latest events ...
	chaosLatest     = 2    // ... and half one of these, most likely still in flight
	sinkFailRate    = 0.15 // deliveries the sink answers 5xx ...
	sinkFailMax     = 3    // ... at most this many times per event (maxAttempts is 10)
	chaosKillMin    = 1500 * time.Millisecond
	chaosKillMax    = 4 * time.Second
	chaosDownMin    = 200 * time.Millisecond // a killed replica stays down this long before its restart
	chaosDownMax    = 1500 * time.Millisecond
	pgDownMin       = time.Second
	pgDownMax       = 3 * time.Second
	redeliverWindow = 2 * time.Second // a replica's completion follows the sink's 2xx within this
)

// Chaos. Three receiver replicas share a private PostgreSQL. A provider sends Stripe-signed
// deliveries (30 % of them repeats of recent events, some still in flight), round robin over
// the replicas, retrying connection errors and 503s until it gets a 2xx. Meanwhile one replica
// at a time is SIGKILLed at seeded random intervals and restarted, PostgreSQL is stopped once
// with -m immediate and started again, and the sink fails some deliveries with 5xx. At the end
// the queue must drain with every acknowledged event processed by the sink, none under two
// Idempotency-Keys, no event accepted (202) twice and no dead letter. Redeliveries under the
// same key (at-least-once towards the sink) are counted and attributed.
func TestChaos(t *testing.T) {
	testtier.RequiresServers(t, "the receiver binary and a control plane (envtest)")
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (rerun the same schedule with -chaos.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	pg := startPrivatePostgres(t)
	ns := newNamespace(t)
	sk := newSink(t)
	sk.failSome(sinkFailRate, sinkFailMax, seed)
	sub := createSubscription(t, ns, "orders", sk.URL(), 10)
	sk.expect(sub)
	rs := make([]*receiverProc, chaosReplicas)
	bases := make([]string, chaosReplicas)
	for i := range rs {
		rs[i] = newReceiver(t, fmt.Sprintf("replica-%d", i), receiverConfig{Namespace: ns, Store: pg.DSN()})
		rs[i].Start()
		bases[i] = rs[i].URL()
	}
	for _, r := range rs {
		r.WaitRoute(sub, sub.Secret)
	}

	began := time.Now()
	ld := startLoad(newClient(bases...), sub, seed, began.Add(*chaosDuration+90*time.Second))
	ch := &chaos{t: t, rng: rng, replicas: rs, pg: pg}
	ch.run(began.Add(*chaosDuration))
	ld.stop()
	loadDone := time.Now()

	st := openStore(t, pg.DSN())
	l, drainErr := waitDrained(st, sk, ld.ackedEvents(), ld.sent, 2*time.Minute)
	drained := time.Now()
	dead, err := st.DeadLetters(context.Background(), 1000)
	if err != nil {
		t.Errorf("listing dead letters: %v", err)
	}

	p := ld.summary()
	why := ch.attribute(l.firstOK)
	report := [][2]string{
		{"seed", fmt.Sprint(seed)},
		{"duration", fmt.Sprintf("%s of load and chaos, %s until the provider's last retry ended, %s more until the queue was empty",
			ch.ended.Sub(began).Round(time.Millisecond), loadDone.Sub(ch.ended).Round(time.Millisecond), drained.Sub(loadDone).Round(time.Millisecond))},
		{"receivers", fmt.Sprintf("%d replicas on one private PostgreSQL, round robin, %d provider connections, at most %d deliveries/s", chaosReplicas, chaosClients, *chaosRate)},
		{"deliveries sent", fmt.Sprintf("%d (%d events + %d duplicates, %d of them while an earlier delivery of the event was unacknowledged) in %d HTTP attempts",
			p.deliveries, p.events, p.deliveries-p.events, p.concurrent, p.attempts)},
		{"acked", fmt.Sprintf("%d deliveries (202=%d, 200=%d), %d events; never acknowledged: %d", p.acked, p.tally.get("202"), p.tally.get("200"), len(p.ackedEvents), len(p.unacked))},
		{"kills", fmt.Sprintf("%d SIGKILLs (%s), replicas down %s in all; exits the test did not cause: %d", len(ch.kills), ch.killsByReplica(), ch.replicaDown.Round(time.Millisecond), ch.ownExits)},
		{"PostgreSQL downtime", fmt.Sprintf("%s (stop -m immediate at +%s, accepting connections again at +%s)",
			ch.pgUp.Sub(ch.pgStop).Round(time.Millisecond), ch.pgStop.Sub(began).Round(time.Millisecond), ch.pgUp.Sub(began).Round(time.Millisecond))},
		{"503s", fmt.Sprintf("%d (%d of them to attempts started while PostgreSQL was down); connection errors %d; all attempts: %s",
			p.tally.get("503"), p.during(ch.pgStop, ch.pgUp, http.StatusServiceUnavailable), p.tally.get("conn_error"), p.tally.String())},
		{"sink", fmt.Sprintf("%d arrivals, %d answered 5xx on purpose (retried), %d events processed", l.arrivals, l.failed, l.processed)},
		{"acknowledged events lost", fmt.Sprintf("%d (acknowledged to the provider, never processed by the sink)", len(l.missing))},
		{"side effects doubled under different keys", fmt.Sprintf("%d (events processed under two Idempotency-Keys)", len(l.twice))},
		{"redeliveries under the same key", fmt.Sprintf("%d (dropped by the sink by Idempotency-Key): %d within %s of a SIGKILL, %d around the PostgreSQL outage, %d otherwise",
			l.redelivered, why.kill, redeliverWindow, why.outage, why.other)},
		{"why redelivered", "when it happens, the sink answered 2xx but the replica holding the lease died (or could not reach PostgreSQL) before it recorded the completion; the lease expired and a replica delivered again"},
		{"dead letters", fmt.Sprint(len(dead))},
		{"events accepted (202) twice", fmt.Sprint(len(p.acceptedTwice))},
		{"events acknowledged without a 202", fmt.Sprintf("%d (the claim committed, the replica was killed before it answered; the provider's retry was a duplicate, 200)", p.neverAccepted)},
	}
	fmt.Println("REPORT receiver-chaos:")
	for _, kv := range report {
		fmt.Printf("REPORT receiver-chaos   %-42s %s\n", kv[0], kv[1])
	}

	if drainErr != nil {
		t.Error(drainErr)
	}
	l.check(t)
	if len(p.unacked) > 0 {
		t.Errorf("%d deliveries never got a 2xx despite retries, e.g. %v", len(p.unacked), first(p.unacked, 5))
	}
	if len(p.acceptedTwice) > 0 {
		t.Errorf("%d events were accepted (202) more than once: a dedupe claim was lost, e.g. %v", len(p.acceptedTwice), first(p.acceptedTwice, 5))
	}
	if n := p.tally.get("404") + p.tally.get("401") + p.tally.get("500"); n > 0 {
		t.Errorf("%d attempts were refused or failed although the subscription and secret never changed: %s", n, p.tally.String())
	}
	for _, j := range first(dead, 5) {
		t.Errorf("dead letter %d: event %s after %d attempts: %s", j.ID, j.Event.EventID, j.Attempt, j.LastError)
	}
	if len(ch.kills) == 0 {
		t.Error("no replica was killed")
	}
	if p.tally.get("conn_error") == 0 {
		t.Error("no delivery saw a connection error: no replica was killed under load")
	}
	if p.tally.get("503") == 0 {
		t.Error("no delivery was answered 503: PostgreSQL was not down under load")
	}
}

// --- the chaos ---------------------------------------------------------------------------------

// chaos kills and restarts replicas and restarts PostgreSQL once, from the test's goroutine.
type chaos struct {
	t        testing.TB
	rng      *rand.Rand
	replicas []*receiverProc
	pg       *privatePostgres

	kills         []time.Time
	killed        []int // replica of each kill
	replicaDown   time.Duration
	ownExits      int
	pgStop, pgUp  time.Time
	ended         time.Time
	pgRestartDone bool
}

func (c *chaos) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)))
}

// run works the schedule until end; it returns with every replica started.
func (c *chaos) run(end time.Time) {
	began := time.Now()
	pgAt := began.Add(time.Duration(float64(end.Sub(began)) * (0.35 + 0.25*c.rng.Float64())))
	next := began.Add(c.between(chaosKillMin, chaosKillMax))
	for time.Now().Before(end) {
		c.restartExited()
		switch now := time.Now(); {
		case !c.pgRestartDone && now.After(pgAt):
			c.restartPostgres()
		case now.After(next):
			c.killOne()
			next = time.Now().Add(c.between(chaosKillMin, chaosKillMax))
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !c.pgRestartDone {
		c.restartPostgres()
	}
	c.ended = time.Now()
	c.restartExited()
	for _, r := range c.replicas {
		r.WaitReady()
	}
}

func (c *chaos) killOne() {
	i := c.rng.IntN(len(c.replicas))
	r := c.replicas[i]
	r.Kill()
	at := time.Now()
	c.kills, c.killed = append(c.kills, at), append(c.killed, i)
	time.Sleep(c.between(chaosDownMin, chaosDownMax))
	r.Start()
	c.replicaDown += time.Since(at)
}

// restartPostgres stops the server the hard way once every replica is up (a replica starting
// while it is down would exit: its store does not open), and starts it again.
func (c *chaos) restartPostgres() {
	c.pgRestartDone = true
	for _, r := range c.replicas {
		r.WaitReady()
	}
	if err := c.pg.StopImmediate(); err != nil {
		c.t.Fatal(err)
	}
	c.pgStop = time.Now()
	time.Sleep(c.between(pgDownMin, pgDownMax))
	if err := c.pg.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.pgUp = time.Now()
}

// restartExited restarts replicas that exited although the test did not kill them (every kill
// is followed by its restart before this runs again); each is an error of the receiver.
func (c *chaos) restartExited() {
	for _, r := range c.replicas {
		if r.exited() {
			c.ownExits++
			c.t.Errorf("%s exited on its own: %v", r.name, r.running().err)
			r.Start()
		}
	}
}

func (c *chaos) killsByReplica() string {
	n := make([]int, len(c.replicas))
	for _, i := range c.killed {
		n[i]++
	}
	parts := make([]string, len(n))
	for i, k := range n {
		parts[i] = fmt.Sprintf("%s %d", c.replicas[i].name, k)
	}
	return strings.Join(parts, ", ")
}

// redeliveryCauses sorts redeliveries by what most likely made the completion go unrecorded.
type redeliveryCauses struct{ kill, outage, other int }

// attribute takes, for each redelivery, when the sink first answered 2xx under its key: a kill
// shortly after it, or PostgreSQL down around it (its connections are broken until each is
// retried once it is back), explains why the completion was not recorded.
func (c *chaos) attribute(firstOK []time.Time) redeliveryCauses {
	var r redeliveryCauses
	for _, ok := range firstOK {
		switch {
		case !ok.Before(c.pgStop.Add(-redeliverWindow)) && !ok.After(c.pgUp.Add(redeliverWindow)):
			r.outage++
		case c.killedWithin(ok, redeliverWindow):
			r.kill++
		default:
			r.other++
		}
	}
	return r
}

// killedWithin tells whether a replica was killed within d after at, or shortly before it (the
// sink answers a request that was sent in full after its sender died).
func (c *chaos) killedWithin(at time.Time, d time.Duration) bool {
	from := at.Add(-d / 4)
	i := sort.Search(len(c.kills), func(i int) bool { return !c.kills[i].Before(from) })
	return i < len(c.kills) && !c.kills[i].After(at.Add(d))
}

// --- the provider ------------------------------------------------------------------------------

// load is the provider: a generator of deliveries (new events and repeats of recent ones) at
// most at -chaos.rate, and clients delivering each until it is acknowledged or deadline passes.
type load struct {
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	results []*delivery
	sent    map[string]bool // every event sent, once the load has stopped
}

func startLoad(cl *provider, sub subscription, seed uint64, deadline time.Time) *load {
	l := &load{done: make(chan struct{}), sent: map[string]bool{}}
	work := make(chan string)
	for range chaosClients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for id := range work {
				d := cl.deliverWithRetries(sub, id, deadline, nil)
				l.mu.Lock()
				l.results = append(l.results, d)
				l.mu.Unlock()
			}
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer close(work)
		rng := rand.New(rand.NewPCG(seed, 2))
		run := randHex(3)
		var recent []string
		tick := time.NewTicker(time.Second / time.Duration(max(1, *chaosRate)))
		defer tick.Stop()
		for n := 0; ; {
			var id string
			if len(recent) > 0 && rng.Float64() < chaosDupRate {
				window := len(recent)
				if rng.IntN(2) == 0 {
					window = min(window, chaosLatest)
				}
				id = recent[len(recent)-1-rng.IntN(window)]
			} else {
				id = fmt.Sprintf("evt_chaos_%s_%06d", run, n)
				n++
				recent = append(recent, id)
				if len(recent) > chaosRecent {
					recent = recent[1:]
				}
			}
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			select {
			case <-l.done:
				return
			case work <- id:
				l.mu.Lock()
				l.sent[id] = true
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// stop ends the generator and waits for the deliveries under way to end.
func (l *load) stop() {
	close(l.done)
	l.wg.Wait()
}

func (l *load) ackedEvents() map[string]bool {
	acked := map[string]bool{}
	for _, d := range l.results {
		if d.acked() {
			acked[d.eventID] = true
		}
	}
	return acked
}

// providerSummary is what the provider saw.
type providerSummary struct {
	deliveries, events, concurrent, attempts, acked int
	ackedEvents                                     map[string]bool
	unacked, acceptedTwice                          []string
	neverAccepted                                   int // acknowledged events that no delivery got a 202 for
	tally                                           counter
	all                                             []attempt
}

func (l *load) summary() *providerSummary {
	p := &providerSummary{deliveries: len(l.results), events: len(l.sent), ackedEvents: l.ackedEvents()}
	byEvent := map[string][]*delivery{}
	for _, d := range l.results {
		byEvent[d.eventID] = append(byEvent[d.eventID], d)
		p.attempts += len(d.attempts)
		if d.acked() {
			p.acked++
		} else {
			p.unacked = append(p.unacked, fmt.Sprintf("%s (%s after %d attempts)", d.eventID, statusLabel(d.attempts[len(d.attempts)-1]), len(d.attempts)))
		}
		for _, a := range d.attempts {
			p.tally.add(statusLabel(a))
			p.all = append(p.all, a)
		}
	}
	for id, ds := range byEvent {
		sort.Slice(ds, func(i, j int) bool { return ds[i].attempts[0].start.Before(ds[j].attempts[0].start) })
		accepted := 0
		var ackedBy time.Time // the earliest acknowledgement of the deliveries started so far
		for k, d := range ds {
			start := d.attempts[0].start
			if k > 0 && (ackedBy.IsZero() || start.Before(ackedBy)) {
				p.concurrent++
			}
			if end := d.attempts[len(d.attempts)-1].end; d.acked() && (ackedBy.IsZero() || end.Before(ackedBy)) {
				ackedBy = end
			}
			for _, a := range d.attempts {
				if a.status == http.StatusAccepted {
					accepted++
				}
			}
		}
		if accepted > 1 {
			p.acceptedTwice = append(p.acceptedTwice, id)
		}
		if accepted == 0 && p.ackedEvents[id] {
			p.neverAccepted++
		}
	}
	sort.Strings(p.unacked)
	sort.Strings(p.acceptedTwice)
	return p
}

// during counts the attempts answered status that started between from and to.
func (p *providerSummary) during(from, to time.Time, status int) int {
	n := 0
	for _, a := range p.all {
		if a.status == status && !a.start.Before(from) && !a.start.After(to) {
			n++
		}
	}
	return n
}
