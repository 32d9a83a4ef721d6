package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsBroker is the demo's embedded nats-server with JetStream: the second sink of the
// fan-out subscription (see fanOut) publishes to a stream on it.
type natsBroker struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

// startNATSStep runs a nats-server with JetStream in the demo process, on a free 127.0.0.1
// port, storing in the temp folder.
func (d *demo) startNATSStep(ctx context.Context) error {
	d.step("starting NATS (an embedded nats-server with JetStream, in the demo process): the fan-out's second sink")
	started := time.Now()
	dir := filepath.Join(d.tmp, "nats")
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		return fmt.Errorf("starting nats-server: %w", err)
	}
	go srv.Start()
	d.nats = &natsBroker{srv: srv}
	if !srv.ReadyForConnections(10 * time.Second) {
		return errors.New("nats-server not ready for connections after 10s")
	}
	if d.nats.nc, err = nats.Connect(srv.ClientURL(), nats.Name("hookwarden-demo")); err != nil {
		return fmt.Errorf("connecting to nats-server: %w", err)
	}
	if d.nats.js, err = jetstream.New(d.nats.nc); err != nil {
		return err
	}
	d.info("nats-server %s ready in %s (JetStream store: %s)", srv.ClientURL(), time.Since(started).Round(time.Millisecond), dir)
	return ctx.Err()
}

// streamName is the JetStream stream the demo creates for subject: DEMO_ and the subject in
// upper case, dots and dashes as underscores.
func streamName(subject string) string {
	return "DEMO_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(subject))
}

// createStream creates the stream that captures subject (the receiver publishes only to a
// subject a stream captures).
func (b *natsBroker) createStream(ctx context.Context, subject string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := streamName(subject)
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		return "", fmt.Errorf("creating JetStream stream %s for %s: %w", name, subject, err)
	}
	return name, nil
}

// natsMsg is what the demo checks of one message in the stream.
type natsMsg struct {
	key, ceID, ceType, source, bodySum string
}

// readStream waits (bounded) until stream holds at least want messages, a little longer for
// late ones, then reads them all with an ordered consumer.
func (b *natsBroker) readStream(ctx context.Context, stream string, want int) ([]natsMsg, error) {
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	count := func(ctx context.Context) (uint64, error) {
		info, err := st.Info(ctx)
		if err != nil {
			return 0, err
		}
		return info.State.Msgs, nil
	}
	err = poll(ctx, sinkTimeout, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		n, err := count(ctx)
		if err == nil && n < uint64(want) {
			err = fmt.Errorf("stream %s holds %d of %d messages", stream, n, want)
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	select { // anything else (a repeat, an event the filter should have kept out) comes soon
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(sinkSettle):
	}
	n, err := count(ctx)
	if err != nil {
		return nil, err
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	batch, err := cons.Fetch(int(n), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return nil, err
	}
	var out []natsMsg
	for m := range batch.Messages() {
		h := m.Headers()
		out = append(out, natsMsg{key: h.Get(jetstream.MsgIDHeader), ceID: h.Get("ce-id"), ceType: h.Get("ce-type"), source: h.Get("ce-source"), bodySum: bodySum(m.Data())})
	}
	if err := batch.Error(); err != nil {
		return nil, err
	}
	if len(out) != int(n) {
		return nil, fmt.Errorf("read %d of the %d messages in stream %s", len(out), n, stream)
	}
	return out, nil
}

// stop closes the demo's connection and shuts the server down.
func (b *natsBroker) stop() {
	if b.nc != nil {
		b.nc.Close()
	}
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
}

// describeNATSFilter says which events s's JetStream sink takes.
func describeNATSFilter(s subRef) string {
	if s.natsType == "" {
		return ", no filter"
	}
	return ", filter " + natsFilter(s.natsType)
}

// checkFanOut reads the fan-out subscription's stream after the burst and checks that it holds
// each event its JetStream sink's filter selects exactly once, with the body sent and the
// right headers, and nothing else; the HTTP sink got every event (checkSink).
func (d *demo) checkFanOut(ctx context.Context, targets []*target, events []*burstEvent) error {
	var t *target
	for _, c := range targets {
		if c.sub.natsSubject != "" {
			t = c
		}
	}
	if t == nil || d.natsStream == "" {
		return errors.New("no subscription fans out to NATS: no sample has a delivery sink")
	}
	want := map[string]*burstEvent{} // Nats-Msg-Id (the Idempotency-Key) → event
	all := 0
	for _, e := range events {
		if e.t != t {
			continue
		}
		all++
		if t.sub.natsType == "" || e.typ == t.sub.natsType {
			want[t.uid+":"+e.id] = e
		}
	}
	d.info("nats: reading stream %s (subject %s) with an ordered consumer: %d events expected ...", d.natsStream, t.sub.natsSubject, len(want))
	msgs, err := d.nats.readStream(ctx, d.natsStream, len(want))
	if err != nil {
		return fmt.Errorf("reading the fan-out's JetStream stream %s: %w", d.natsStream, err)
	}
	var problems []string
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m.key]++
		e, ok := want[m.key]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("unexpected message: Nats-Msg-Id %q, ce-id %q, ce-type %q", m.key, m.ceID, m.ceType))
		case m.ceID != e.id || m.ceType != e.typ || m.source != sinkSource(t.sub):
			problems = append(problems, fmt.Sprintf("%s: ce-id %q, ce-type %q, ce-source %q", e.id, m.ceID, m.ceType, m.source))
		case m.bodySum != bodySum(e.body):
			problems = append(problems, fmt.Sprintf("%s: the body in the stream is not the body sent", e.id))
		}
	}
	for k, n := range seen {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("Nats-Msg-Id %s %d times", k, n))
		}
	}
	d.fanOut = fmt.Sprintf("%s fanned out to its HTTP sink (%d events) and NATS stream %s (%d events%s)",
		t.sub.name, all, t.sub.natsSubject, len(msgs), describeNATSFilter(t.sub))
	d.info("fan-out: http sink %d events, nats stream %s %d events (stream %s%s)", all, t.sub.natsSubject, len(msgs), d.natsStream, describeNATSFilter(t.sub))
	if len(problems) > 0 {
		return fmt.Errorf("the JetStream stream %s is wrong: %s", d.natsStream, strings.Join(firstN(problems, 5), "; "))
	}
	if len(msgs) != len(want) {
		return fmt.Errorf("the JetStream stream %s holds %d messages, want %d (of %s's %d events%s)", d.natsStream, len(msgs), len(want), t.sub.name, all, describeNATSFilter(t.sub))
	}
	d.info("each selected event exactly once in the stream, with the body sent, Nats-Msg-Id = Idempotency-Key, ce-id, ce-type and ce-source as at the HTTP sink; no other event")
	return nil
}
