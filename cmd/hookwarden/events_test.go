package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"

	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// replaySink records each delivery as "ce-id key replay" (replay: ce-hookwardenreplay).
type replaySink struct {
	mu   sync.Mutex
	seen []string
}

func (s *replaySink) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, r.Header.Get("ce-id")+" "+r.Header.Get("Idempotency-Key")+" "+r.Header.Get("ce-"+deliver.ReplayAttribute))
}

func (s *replaySink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

// TestEvents (issue 31): a real receiver (handler, ledger on SQLite or on Redis, delivery pool)
// delivers three events; hookwarden events lists them page by page and shows one to a viewer,
// refuses the viewer a replay, and replays the range for an admin: each event reaches the sink
// once more per replay, same ce-id, marked hookwardenreplay, with a key of its own unless
// --keep-key. An empty range, an unknown sink and a range past the retention are refused with
// nothing sent.
func TestEvents(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	for _, kind := range []string{"sqlite", "redis"} {
		t.Run(kind, func(t *testing.T) { testEvents(t, kind) })
	}
}

func testEvents(t *testing.T, kind string) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tn := newTenant(t, g, "ledger-"+kind)

	snk := &replaySink{}
	sinkSrv := httptest.NewServer(snk)
	defer sinkSrv.Close()
	st := openStore(ctx, t, g, kind)
	ledger, ok := st.(store.Ledger)
	g.Expect(ok).To(BeTrue(), "%s keeps no browsable ledger", kind)
	const secret = "whsec_ledger"
	rig := newReceiverRig(ctx, t, g, st, receiver.Route{Namespace: tn.ns, Name: "orders", UID: "uid-orders", Provider: "stripe", Secrets: [][]byte{[]byte(secret)},
		Sinks: receiver.OneHTTPSink(sinkSrv.URL), MaxAttempts: 3, DedupeWindow: time.Hour, Retention: time.Hour})
	viewer, adminTok := tokenFor(t, g, tn.ns, "ev-viewer", "events-viewer"), tokenFor(t, g, tn.ns, "ev-admin", "events-admin")
	events := func(token string, args ...string) (int, string, string) {
		return rig.command(t, "events", token, args...)
	}

	start := time.Now().Add(-time.Second)
	for _, id := range []string{"evt_l1", "evt_l2", "evt_l3"} {
		g.Expect(rig.post(g, id)).To(BeNumerically("<", 300))
	}
	idle := func() int { n, _ := st.Depth(ctx); return n }
	g.Eventually(snk.got).Should(HaveLen(3))
	g.Eventually(idle).Should(BeZero())
	first := snk.got()
	g.Expect(first).To(ConsistOf("evt_l1 uid-orders:evt_l1 ", "evt_l2 uid-orders:evt_l2 ", "evt_l3 uid-orders:evt_l3 "))
	since, until := start.UTC().Format(time.RFC3339Nano), time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)

	g.Eventually(func() int { code, _, _ := events(viewer, "list"); return code }).WithTimeout(30 * time.Second).Should(Equal(cli.ExitOK))
	code, stdout, stderr := events(viewer, "list", "--since", since, "--limit", "2")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(MatchRegexp(`(?m)^RECEIVED\s+SUBSCRIPTION\s+EVENT\s+TYPE\s+SINKS$`))
	g.Expect(stdout).To(MatchRegexp(`ledger\S*/orders\s+evt_l1\s+invoice.paid\s+default:completed\n.*evt_l2`))
	g.Expect(stdout).NotTo(ContainSubstring("evt_l3"))
	m := regexp.MustCompile(`--after (\S+)`).FindStringSubmatch(stderr)
	g.Expect(m).To(HaveLen(2), stderr)
	code, stdout, stderr = events(viewer, "list", "--since", since, "--limit", "2", "--after", m[1])
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(ContainSubstring("evt_l3"))
	g.Expect(stdout).NotTo(ContainSubstring("evt_l1"))
	g.Expect(stderr).NotTo(ContainSubstring("--after"))
	code, stdout, _ = events(viewer, "show", tn.ns+"/orders", "evt_l2")
	g.Expect(code).To(Equal(cli.ExitOK))
	g.Expect(stdout).To(ContainSubstring("eventID: evt_l2"))
	g.Expect(stdout).To(ContainSubstring("state: completed"))
	g.Expect(stdout).To(ContainSubstring("deliveredAt:"))

	// -l selects subscriptions by label, in -n's namespace: the ledger's events of those only.
	createUnreconciled(t, g, tn.stripeSub("orders", "https://hooks.example.com/orders", "invoice.paid"))
	createUnreconciled(t, g, tn.stripeSub("audit", "https://hooks.example.com/audit", "invoice.paid"))
	code, stdout, stderr = events(viewer, "list", "--since", since, "-n", tn.ns, "-l", "app=orders")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(strings.Count(stdout, "default:completed")).To(Equal(3), stdout)
	code, stdout, stderr = events(viewer, "list", "--since", since, "-n", tn.ns, "-l", "app=audit")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).NotTo(ContainSubstring("evt_l"))
	code, _, stderr = events(viewer, "list", "-n", tn.ns, "-l", "app=nope")
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	g.Expect(stderr).To(ContainSubstring("no WebhookSubscription in namespace " + tn.ns + " matching app=nope"))

	// A viewer may not replay.
	code, _, stderr = events(viewer, "replay", "--since", since)
	g.Expect(code).To(Equal(cli.ExitError))
	g.Expect(stderr).To(ContainSubstring("the ClusterRoles events-viewer and events-admin grant it"))

	// Bad input: nothing sent.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "3h", "--until", "2h"}, "no event received between"},
		{[]string{"--since", since, "--sink", "nope"}, `no subscription of the replay has a sink named "nope" (its sinks: default)`},
		{[]string{"--until", until}, "events replay needs --since"},
		{[]string{"--since", "yesterday"}, "--since: \"yesterday\": want an RFC 3339 time"},
	} {
		code, _, stderr = events(adminTok, append([]string{"replay"}, c.args...)...)
		g.Expect(code).To(Equal(cli.ExitUsage), stderr)
		g.Expect(stderr).To(ContainSubstring(c.want))
	}
	g.Expect(snk.got()).To(HaveLen(3))

	// Replayed: once more per event, a key of its own; then again keeping the key.
	code, stdout, stderr = events(adminTok, "replay", "--since", since, "--until", until)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(Equal("replaying 3 events: 3 deliveries back on the delivery path, each with an Idempotency-Key of its own\n"))
	t.Logf("events replay:\n%s", stdout)
	g.Eventually(snk.got).Should(HaveLen(6))
	g.Eventually(idle).Should(BeZero())
	g.Expect(snk.got()[3:]).To(ConsistOf("evt_l1 uid-orders:evt_l1:replay-1 1", "evt_l2 uid-orders:evt_l2:replay-1 1", "evt_l3 uid-orders:evt_l3:replay-1 1"))
	code, stdout, stderr = events(adminTok, "replay", "--since", since, "--until", until, "--sink", "default", "--keep-key", "--type", "invoice.paid")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(ContainSubstring("each with its original Idempotency-Key"))
	g.Eventually(snk.got).Should(HaveLen(9))
	g.Eventually(idle).Should(BeZero())
	g.Expect(snk.got()[6:]).To(ConsistOf("evt_l1 uid-orders:evt_l1 2", "evt_l2 uid-orders:evt_l2 2", "evt_l3 uid-orders:evt_l3 2"))
	code, stdout, _ = events(viewer, "list", "--since", since)
	g.Expect(code).To(Equal(cli.ExitOK))
	t.Logf("events list after two replays:\n%s", stdout)
	g.Expect(strings.Count(stdout, "default:completed(replayed 2)")).To(Equal(3), stdout)

	// Past the retention (the sweeper's pass an hour and more later): refused, nothing sent.
	retentions, _ := rig.routes.Retentions()
	receiver.ForgetPayloads(ctx, ledger, retentions, time.Now().Add(time.Hour+time.Minute), logr.Discard())
	code, _, stderr = events(adminTok, "replay", "--since", since, "--until", until)
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	g.Expect(stderr).To(ContainSubstring("3 of the 3 events received between"))
	g.Expect(stderr).To(ContainSubstring("are past their retention (spec.delivery.retention): their payloads are gone; nothing replayed"))
	g.Expect(snk.got()).To(HaveLen(9))
}

// TestEventsListReadsOnPastShortPages: on Redis a filtered request reads at most 2,000 index
// entries per subscription, so a type that only comes after thousands of others answers its
// first requests empty, each with a cursor. events list reads on until it holds --limit events
// and prints them with the cursor of the next page, never a bare "more events" after nothing;
// the next page ends the walk. SQLite, which answers a full page at once, lists the same.
func TestEventsListReadsOnPastShortPages(t *testing.T) {
	testtier.RequiresServers(t, "a control plane (envtest) and the fakes")
	for _, kind := range []string{"sqlite", "redis"} {
		t.Run(kind, func(t *testing.T) { testEventsListReadsOnPastShortPages(t, kind) })
	}
}

func testEventsListReadsOnPastShortPages(t *testing.T, kind string) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tn := newTenant(t, g, "sparse-"+kind)
	st := openStore(ctx, t, g, kind)
	rig := newReceiverRig(ctx, t, g, st, receiver.Route{Namespace: tn.ns, Name: "orders", UID: "uid-orders", Provider: "stripe",
		Secrets: [][]byte{[]byte("whsec_sparse")}, Sinks: receiver.OneHTTPSink("http://127.0.0.1:1"), MaxAttempts: 3})
	viewer := tokenFor(t, g, tn.ns, "sparse-viewer", "events-viewer")

	// 4,500 refunds, then three payments: received an hour ahead, so that the delivery pool,
	// which leases jobs by due time, leaves them alone (the list reads them all the same).
	sub, base := tn.ns+"/orders", time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	ev := func(id, typ string, i int) store.Event {
		return store.Event{Subscription: sub, SubscriptionUID: "uid-orders", EventID: id, EventType: typ, ContentType: "application/json",
			Payload: []byte(`{"id":"` + id + `"}`), ReceivedAt: base.Add(time.Duration(i) * time.Millisecond), MaxAttempts: 3}
	}
	var events []store.Event
	for i := range 4500 {
		events = append(events, ev(fmt.Sprintf("evt_r%d", i), "charge.refunded", i))
	}
	for k, id := range []string{"evt_p1", "evt_p2", "evt_p3"} {
		events = append(events, ev(id, "invoice.paid", 4500+k))
	}
	for chunk := range slices.Chunk(events, 500) {
		_, err := st.ClaimBatch(ctx, chunk)
		g.Expect(err).NotTo(HaveOccurred())
	}

	since := base.Add(-time.Second).Format(time.RFC3339Nano)
	list := func(args ...string) (int, string, string) {
		return rig.command(t, "events", viewer, append([]string{"list", "--since", since, "--type", "invoice.paid", "--limit", "2"}, args...)...)
	}
	g.Eventually(func() int { code, _, _ := rig.command(t, "events", viewer, "list"); return code }).WithTimeout(30 * time.Second).Should(Equal(cli.ExitOK))
	code, stdout, stderr := list()
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(MatchRegexp(`evt_p1\s+invoice.paid.*\n.*evt_p2\s+invoice.paid`))
	g.Expect(stdout).NotTo(ContainSubstring("evt_p3"))
	g.Expect(stdout).NotTo(ContainSubstring("evt_r"))
	m := regexp.MustCompile(`^more events: the next page is --after (\S+)\n$`).FindStringSubmatch(stderr)
	g.Expect(m).To(HaveLen(2), stderr)
	code, stdout, stderr = list("--after", m[1])
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(stdout).To(ContainSubstring("evt_p3"))
	g.Expect(stdout).NotTo(ContainSubstring("evt_p2"))
	g.Expect(stderr).To(BeEmpty())
}
