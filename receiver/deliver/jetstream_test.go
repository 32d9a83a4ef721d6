package deliver

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookwarden/hookwarden/internal/brokertest"
	"github.com/hookwarden/hookwarden/internal/testtier"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// startNATS runs an embedded nats-server with JetStream (see brokertest.StartNATS).
func startNATS(t *testing.T, dir string, port int) *server.Server {
	t.Helper()
	testtier.RequiresServers(t, "a NATS JetStream server")
	return brokertest.StartNATS(t, dir, port)
}

// streamOf creates (or finds) stream name capturing subjects on s.
func streamOf(t *testing.T, s *server.Server, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	st, _ := brokertest.Stream(t, s, name, subjects...)
	return st
}

// messages reads every message of st, in stream order.
func messages(t *testing.T, st jetstream.Stream) []*jetstream.RawStreamMsg {
	t.Helper()
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// newJetStream is the publisher of a sink at url and subject, closed when the test ends.
func newJetStream(t *testing.T, url, subject string, auth JetStreamAuth) *JetStream {
	t.Helper()
	p, err := NewJetStream([]string{url}, subject, auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func count(t *testing.T, st jetstream.Stream) uint64 {
	t.Helper()
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// Issue 30: a NATS JetStream sink publishes each event its filter selects once, with
// Nats-Msg-Id = the Idempotency-Key and the CloudEvent attributes as ce- headers; a sink whose
// subject no stream captures is misconfigured: its events wait, uncounted, and are published
// once the stream exists; a repeat inside the duplicate window is dropped by the stream and
// counted.
func TestJetStreamSink(t *testing.T) {
	ns := startNATS(t, t.TempDir(), server.RANDOM_PORT)
	hooks := streamOf(t, ns, "HOOKS", "hooks.>")
	r := newSinkRig(t, Options{Workers: 4})
	bus := newJetStream(t, ns.ClientURL(), "hooks.orders", JetStreamAuth{})
	invoices, err := CompileFilter("type.startsWith('invoice.')")
	if err != nil {
		t.Fatal(err)
	}
	lost := newJetStream(t, ns.ClientURL(), "nowhere.orders", JetStreamAuth{})
	r.set("bus", func(s *Sink) { *s = Sink{Name: "bus", Publisher: bus, Filter: invoices} })
	r.set("lost", func(s *Sink) { *s = Sink{Name: "lost", Publisher: lost} })
	ids := r.claim(t, []string{"bus", "lost"}, slices.Repeat([]string{"invoice.paid", "charge.succeeded"}, 5)...)
	r.run(t)

	eventually(t, "the stream holds the five invoices", func() bool { return count(t, hooks) == 5 })
	var got []string
	for _, m := range messages(t, hooks) {
		id := m.Header.Get("ce-id")
		got = append(got, id)
		if m.Header.Get("Nats-Msg-Id") != "uid:"+id || m.Header.Get("Idempotency-Key") != "uid:"+id || m.Header.Get("ce-type") != "invoice.paid" ||
			m.Header.Get("ce-source") != "hookwarden/shop/orders" || m.Subject != "hooks.orders" {
			t.Errorf("message %s: subject %s, headers %v", id, m.Subject, m.Header)
		}
	}
	wantInvoices := invoiceIDs(ids)
	if !slices.Equal(sorted(got), wantInvoices) {
		t.Errorf("stream holds %v, want %v", got, wantInvoices)
	}

	eventually(t, "the misconfigured sink's events were offered and are waiting", func() bool {
		return r.logs.contains(`no JetStream stream answered for subject \"nowhere.orders\"`) && r.depth(t) == 10
	})
	if letters, _ := r.st.DeadLetters(context.Background(), 10); len(letters) != 0 {
		t.Fatalf("%d dead letters while the stream was missing, want none: the events wait", len(letters))
	}
	nowhere := streamOf(t, ns, "NOWHERE", "nowhere.>")
	eventually(t, "once the stream exists every event is published", func() bool { return r.depth(t) == 0 })
	if n := count(t, nowhere); n != 10 {
		t.Errorf("the new stream holds %d messages, want 10", n)
	}

	// A repeat (a receiver that died after the broker's acknowledgement, before it recorded
	// it) is dropped by the stream inside its duplicate window, and reported as such.
	ev := store.Event{Subscription: "shop/orders", SubscriptionUID: "uid", EventID: ids[0], EventType: "invoice.paid", Payload: []byte("{}")}
	pub, err := bus.Publish(context.Background(), ev)
	if err != nil || !pub.Duplicate {
		t.Errorf("publishing %s again = %+v, %v; want a duplicate the stream dropped", ids[0], pub, err)
	}
	if n := count(t, hooks); n != 5 {
		t.Errorf("the stream holds %d messages after the repeat, want 5", n)
	}

	// Issue 31: a replay by hand that keeps the key is dropped by the stream like a repeat
	// (why events replay takes a fresh key by default); one with a fresh key is taken, marked
	// ce-hookwardenreplay, same ce-id.
	kept := ev
	kept.Replays = 1
	if pub, err := bus.Publish(context.Background(), kept); err != nil || !pub.Duplicate {
		t.Errorf("a replay keeping the key = %+v, %v; want a duplicate the stream dropped", pub, err)
	}
	fresh := kept
	fresh.FreshKey = true
	if pub, err := bus.Publish(context.Background(), fresh); err != nil || pub.Duplicate {
		t.Fatalf("a replay with a fresh key = %+v, %v; want it taken", pub, err)
	}
	msgs := messages(t, hooks)
	if len(msgs) != 6 {
		t.Fatalf("the stream holds %d messages after the replay, want 6", len(msgs))
	}
	last := msgs[5]
	if last.Header.Get("ce-id") != ids[0] || last.Header.Get("ce-"+ReplayAttribute) != "1" || last.Header.Get("Nats-Msg-Id") != "uid:"+ids[0]+":replay-1" {
		t.Errorf("the replay's headers %v: want ce-id %s, ce-hookwardenreplay 1, Nats-Msg-Id uid:%[2]s:replay-1", last.Header, ids[0])
	}
	for _, m := range msgs[:5] {
		if v := m.Header.Get("ce-" + ReplayAttribute); v != "" {
			t.Errorf("a first delivery carries ce-hookwardenreplay %q", v)
		}
	}
}

// Issue 30: the NATS server down while events arrive: they are retried, and published once each
// when it is back (same store, same port); the HTTP sink beside it got every event meanwhile.
func TestJetStreamSinkDownThenCatchingUp(t *testing.T) {
	dir := t.TempDir()
	ns := startNATS(t, dir, server.RANDOM_PORT)
	port := ns.Addr().(*net.TCPAddr).Port
	streamOf(t, ns, "HOOKS", "hooks.>")
	bus := newJetStream(t, ns.ClientURL(), "hooks.orders", JetStreamAuth{})
	ns.Shutdown()
	ns.WaitForShutdown()

	r := newSinkRig(t, Options{Workers: 4})
	web := r.add(t, "web", "", reply{status: 200})
	r.set("bus", func(s *Sink) { *s = Sink{Name: "bus", Publisher: bus, MaxAttempts: 1000} })
	ids := r.claim(t, []string{"bus", "web"}, slices.Repeat([]string{"invoice.paid"}, 20)...)
	r.run(t)
	eventually(t, "the HTTP sink has every event while NATS is down", func() bool { return len(web.received2xx()) == 20 })
	eventually(t, "publishing to the stopped server failed", func() bool { return r.logs.contains("connecting to NATS") })
	eventually(t, "only the bus sink's 20 jobs wait", func() bool { return r.depth(t) == 20 })

	back := startNATS(t, dir, port)
	hooks := streamOf(t, back, "HOOKS", "hooks.>")
	eventually(t, "the bus sink has caught up", func() bool { return r.depth(t) == 0 })
	var got []string
	for _, m := range messages(t, hooks) {
		got = append(got, m.Header.Get("ce-id"))
	}
	if !slices.Equal(sorted(got), ids) {
		t.Errorf("the stream holds %d messages %v, want each of the %d events once", len(got), strings.Join(got, " "), len(ids))
	}
	fmt.Printf("REPORT jetstream-down: %d events, the HTTP sink got them all while NATS was down; after the restart the stream holds %d, each once\n", len(ids), len(got))
}
