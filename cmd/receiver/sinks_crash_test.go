package main_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/brokertest"
	"github.com/hookwarden/hookwarden/internal/routesecret"
)

// brokerCopy is one message a broker holds: the event it carries and its Idempotency-Key.
type brokerCopy struct{ eventID, key string }

// brokerTally is what one broker sink's consumer saw after the run.
type brokerTally struct {
	name string
	// published is how many publishes reached the broker (NATS: seen on the subject by a core
	// subscriber, repeats included; the others store every publish).
	published int
	stored    []brokerCopy
	// dedupes says whether the broker drops repeats itself (JetStream's duplicate window).
	dedupes bool
}

// Issue 30: the receiver SIGKILLed again and again while it publishes one subscription's events
// to a NATS JetStream, a RabbitMQ and a Kafka sink at once (each restart on the same SQLite
// store): every event the receiver acknowledged reaches every broker; JetStream drops the
// repeats itself (each event stored once), RabbitMQ and Kafka may hold repeats, each carrying the
// same Idempotency-Key. A REPORT line per broker says how many.
func TestKillWhilePublishingToBrokers(t *testing.T) {
	const (
		events   = 300
		clients  = 8
		maxKills = 8
	)
	// NATS: an embedded server with JetStream, a stream capturing hooks.>, and a core
	// subscriber that sees every publish, repeats included.
	ns := brokertest.StartNATS(t, t.TempDir(), server.RANDOM_PORT)
	stream, nc := brokertest.Stream(t, ns, "HOOKS", "hooks.>")
	var natsMu sync.Mutex
	natsSeen := 0
	if _, err := nc.Subscribe("hooks.orders", func(m *nats.Msg) {
		if !strings.HasPrefix(m.Header.Get("ce-id"), probePrefix) {
			natsMu.Lock()
			natsSeen++
			natsMu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}

	// RabbitMQ: the machine's, an exchange and a queue of this test.
	rabbitURL := brokertest.RabbitMQ(t)
	rconn, err := amqp.Dial(rabbitURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rconn.Close() })
	rch, err := rconn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	exchange, queue := brokertest.Name("hw-crash"), brokertest.Name("hw-crash-q")
	if err := rch.ExchangeDeclare(exchange, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rch.ExchangeDelete(exchange, false, false) })
	if _, err := rch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = rch.QueueDelete(queue, false, false, false) })
	if err := rch.QueueBind(queue, "orders", exchange, false, nil); err != nil {
		t.Fatal(err)
	}

	// Kafka: kfake in this process; the receiver reaches it over loopback.
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "hooks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)

	nsName := newNamespace(t)
	sub := createSubscriptionWith(t, nsName, "orders", &hookv1.DeliverySpec{MaxAttempts: 100, Sinks: []hookv1.Sink{
		{Name: "jetstream", NATS: &hookv1.NATSSink{URLs: []string{ns.ClientURL()}, Subject: "hooks.orders"}},
		{Name: "rabbit", AMQP: &hookv1.AMQPSink{URL: hookv1.SinkSecretKey{Name: "rabbit", Key: "url"}, Exchange: exchange, RoutingKey: "orders"}},
		{Name: "kafka", Kafka: &hookv1.KafkaSink{BootstrapServers: kc.ListenAddrs(), Topic: "hooks"}},
	}}, map[string][]byte{routesecret.SinkKey("rabbit", routesecret.SinkFieldURL): []byte(rabbitURL)})
	dsn := "sqlite://" + t.TempDir() + "/receiver.db"
	r := startReceiver(t, "receiver", receiverConfig{Namespace: nsName, Store: dsn}, sub)

	// Load: every event once, from concurrent clients that retry while the receiver is down.
	ids := make([]string, events)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt_k_%s_%04d", randHex(3), i)
	}
	cl := newClient(r.URL())
	work := make(chan string)
	acked := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(3 * time.Minute)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if d := cl.deliverWithRetries(sub, id, deadline, nil); d.acked() {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			}
		}()
	}
	go func() {
		for _, id := range ids {
			work <- id
		}
		close(work)
	}()

	loadDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(loadDone)
	}()

	// SIGKILL while publishing: up to maxKills times while the load runs or jobs are due, each
	// restart on the same store.
	st := openStore(t, dsn)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 30))
	depth := func() int {
		n, err := st.Depth(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	kills := 0
	for kills < maxKills {
		time.Sleep(time.Duration(150+rng.IntN(500)) * time.Millisecond) // spreads the kills; not an assertion
		if isClosed(loadDone) && depth() == 0 {
			break // nothing left to publish
		}
		r.Kill()
		kills++
		r.Start()
		r.WaitReady()
	}
	<-loadDone
	if len(acked) != events {
		t.Fatalf("the receiver acknowledged %d of %d events", len(acked), events)
	}
	eventually(t, 2*time.Minute, "every sink's jobs done", func() (bool, string) {
		n, err := st.Depth(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("queue depth %d", n)
	})

	tallies := []brokerTally{natsTally(t, stream, &natsMu, &natsSeen), rabbitTally(t, rch, queue), kafkaTally(t, kc.ListenAddrs(), "hooks")}
	for _, b := range tallies {
		count := map[string]int{}
		repeats := 0
		for _, c := range b.stored {
			if strings.HasPrefix(c.eventID, probePrefix) {
				continue
			}
			count[c.eventID]++
			if count[c.eventID] > 1 {
				repeats++
			}
			if want := sub.UID + ":" + c.eventID; c.key != want {
				t.Errorf("%s: a copy of %s carries Idempotency-Key %q, want %q", b.name, c.eventID, c.key, want)
			}
		}
		lost := 0
		for _, id := range ids {
			if count[id] == 0 {
				lost++
			}
		}
		published := b.published
		if !b.dedupes {
			published = len(count) + repeats
		}
		dropped := published - len(count) - repeats
		fmt.Printf("REPORT kill-while-publishing %s: %d kills; acknowledged by the receiver=%d, published to the broker=%d, repeats dropped by the broker=%d, repeats delivered with the same key=%d, lost=%d\n",
			b.name, kills, len(acked), published, dropped, repeats, lost)
		if lost != 0 {
			t.Errorf("%s: %d acknowledged events never reached the broker", b.name, lost)
		}
		if b.dedupes && repeats != 0 {
			t.Errorf("%s: %d repeats stored, want none: the stream drops them inside its duplicate window", b.name, repeats)
		}
	}
}

func natsTally(t *testing.T, st jetstream.Stream, mu *sync.Mutex, seen *int) brokerTally {
	t.Helper()
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := brokerTally{name: "nats-jetstream", dedupes: true}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		b.stored = append(b.stored, brokerCopy{eventID: m.Header.Get("ce-id"), key: m.Header.Get("Nats-Msg-Id")})
	}
	mu.Lock()
	b.published = *seen
	mu.Unlock()
	return b
}

func rabbitTally(t *testing.T, ch *amqp.Channel, queue string) brokerTally {
	t.Helper()
	b := brokerTally{name: "rabbitmq"}
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return b
		}
		id, _ := d.Headers["cloudEvents_id"].(string)
		b.stored = append(b.stored, brokerCopy{eventID: id, key: d.MessageId})
	}
}

func kafkaTally(t *testing.T, addrs []string, topic string) brokerTally {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	b := brokerTally{name: "kafka"}
	// Read until a poll finds nothing new for a while: the topic is complete (the queue is
	// drained, so nothing more is produced).
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		f := cl.PollFetches(ctx)
		cancel()
		n := 0
		f.EachRecord(func(r *kgo.Record) {
			n++
			c := brokerCopy{}
			for _, h := range r.Headers {
				switch h.Key {
				case "ce_id":
					c.eventID = string(h.Value)
				case "Idempotency-Key":
					c.key = string(h.Value)
				}
			}
			b.stored = append(b.stored, c)
		})
		if n == 0 {
			return b
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
