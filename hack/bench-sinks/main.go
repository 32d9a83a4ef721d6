// Command bench-sinks measures each broker sink type of the receiver against a plain publish
// loop of the same client library, at the same concurrency and durability: events per second
// from the ack (the event already in the ledger) to the broker's acknowledgement, and CPU per
// event. It prints a table with the ratios and whether the goal (at least 0.7× the plain loop's
// rate, at most 1.5× its CPU per event) is met. It asserts nothing.
//
// The ledger is SQLite by default (-store sqlite) or the PostgreSQL database a postgres:// DSN
// names (-store DSN; each run claims events of its own subscription). A last row, the ledger
// alone, delivers to a sink that answers at once without any work: the receiver's own cost per
// event, the floor under every sink's row.
//
// Brokers: an embedded nats-server with a JetStream file stream, the machine's RabbitMQ on
// 127.0.0.1:5672 (a durable queue, persistent messages, confirms) and kfake (in this process).
// CPU is this process's (getrusage): it includes the embedded nats-server and kfake in both rows
// of their sink, and excludes RabbitMQ (another process).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookwarden/hookwarden/receiver/deliver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// target is one sink type: the plain loop's publish of event i, and the receiver's publisher.
type target struct {
	name  string
	plain func(ctx context.Context, i int) error
	sink  deliver.Publisher
	// fanout, when set, makes three more publishers of this kind (to other destinations) for
	// the fan-out row.
	fanout func() []deliver.Publisher
	// http, for the reference row, is an HTTP sink instead of a publisher.
	http    *deliver.HTTPTarget
	cleanup func()
}

// result is one measured run.
type result struct {
	events int
	wall   time.Duration
	cpu    time.Duration
}

func (r result) rate() float64        { return float64(r.events) / r.wall.Seconds() }
func (r result) cpuPerEvent() float64 { return float64(r.cpu.Microseconds()) / float64(r.events) }
func ratio(a, b float64) float64      { return a / b }
func payload(i int) []byte {
	return fmt.Appendf(nil, `{"id":"evt_%07d","type":"invoice.paid","data":{"object":{"id":"in_%d"}}}`, i, i)
}
func eventID(run string, i int) string { return fmt.Sprintf("evt_%s_%07d", run, i) }
func key(run string, i int) string     { return "bench-uid:" + eventID(run, i) }
func check(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-sinks: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	n := flag.Int("events", 3000, "events per run")
	conc := flag.Int("concurrency", deliver.DefaultWorkers, "publishers at once (the receiver's --workers)")
	only := flag.String("only", "", "comma-separated sink types to run (http,nats,amqp,kafka,ledger; empty: all)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	ledger := flag.String("store", "sqlite", `the ledger: "sqlite" (a file per run) or a postgres:// DSN of a database of its own (a run waits for the whole queue to drain and delivers whatever jobs it holds)`)
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		check(err, "cpu profile")
		check(pprof.StartCPUProfile(f), "cpu profile")
		defer pprof.StopCPUProfile()
	}
	dir, err := os.MkdirTemp("", "bench-sinks-")
	check(err, "temp dir")
	defer os.RemoveAll(dir)

	var targets []func() (target, error)
	want := func(name string) bool { return *only == "" || strings.Contains(","+*only+",", ","+name+",") }
	if want("http") {
		targets = append(targets, httpTarget)
	}
	if want("nats") {
		targets = append(targets, func() (target, error) { return natsTarget(filepath.Join(dir, "nats")) })
	}
	if want("amqp") {
		targets = append(targets, amqpTarget)
	}
	if want("kafka") {
		targets = append(targets, kafkaTarget)
	}

	open, kind := ledgerOpener(*ledger, dir)
	fmt.Printf("bench-sinks: %d events per run, concurrency %d; ack→broker ack (the receiver: ledger on %s, a job per event, reported done)\n\n", *n, *conc, kind)
	fmt.Printf("| sink | plain loop ev/s | receiver ev/s | rate ratio | plain CPU µs/ev | receiver CPU µs/ev | CPU ratio | goal (≥0.7× rate, ≤1.5× CPU) |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var fanouts []string
	defer func() {
		if len(fanouts) == 0 {
			return
		}
		fmt.Printf("\nFan-out: every event to each of several sinks of one kind (goal: at most N× one sink's CPU per event)\n\n")
		fmt.Printf("| sink | sinks | events/s (each to every sink) | one sink CPU µs/ev | fan-out CPU µs/ev | ratio | goal (≤N×) |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, l := range fanouts {
			fmt.Println(l)
		}
	}()
	for i, mk := range targets {
		t, err := mk()
		if err != nil {
			fmt.Printf("| target %d | not run: %v | | | | | | |\n", i+1, err)
			continue
		}
		plain := runPlain(t, *n, *conc)
		recv := runReceiver(t, open(fmt.Sprintf("ledger-%d", i)), *n, *conc)
		if t.fanout != nil {
			sinks := map[string]deliver.Sink{}
			for j, p := range t.fanout() {
				name := fmt.Sprintf("bus%d", j+1)
				sinks[name] = deliver.Sink{Name: name, Publisher: p}
				defer p.Close()
			}
			fan := runPool(sinks, open(fmt.Sprintf("fanout-%d", i)), *n, *conc)
			fr := ratio(fan.cpuPerEvent(), recv.cpuPerEvent())
			fanouts = append(fanouts, fmt.Sprintf("| %s | %d | %.0f | %.0f | %.0f | %.2f× | %s |", t.name, len(sinks), fan.rate(), recv.cpuPerEvent(), fan.cpuPerEvent(), fr,
				map[bool]string{true: "met", false: "not met"}[fr <= float64(len(sinks))]))
		}
		t.cleanup()
		rr, cr := ratio(recv.rate(), plain.rate()), ratio(recv.cpuPerEvent(), plain.cpuPerEvent())
		met := "met"
		if rr < 0.7 || cr > 1.5 {
			met = "not met"
		}
		fmt.Printf("| %s | %.0f | %.0f | %.2f× | %.0f | %.0f | %.2f× | %s |\n", t.name, plain.rate(), recv.rate(), rr, plain.cpuPerEvent(), recv.cpuPerEvent(), cr, met)
	}
	if want("ledger") {
		ledgerAlone(open("ledger-alone"), *n, *conc)
	}
}

// ledgerOpener opens a ledger per run: a SQLite file in dir, or the PostgreSQL database of dsn
// (each run claims events of its own subscription); kind names it.
func ledgerOpener(dsn, dir string) (open func(name string) store.Store, kind string) {
	if dsn == "sqlite" {
		return func(name string) store.Store {
			st, err := store.OpenSQLite(filepath.Join(dir, name+".db"))
			check(err, "ledger")
			return st
		}, "SQLite"
	}
	return func(string) store.Store {
		st, err := store.Open(context.Background(), dsn)
		check(err, "ledger")
		return st
	}, "PostgreSQL"
}

// ledgerAlone prints the row of the receiver delivering to a sink that costs nothing. There is
// no plain loop: nothing is published. It is the floor under every row above.
func ledgerAlone(st store.Store, n, conc int) {
	r := runPool(map[string]deliver.Sink{"bus": {Name: "bus", Publisher: noop{}}}, st, n, conc)
	fmt.Printf("| ledger alone (a sink that answers at once: lease, report) | | %.0f | | | %.0f | | the floor |\n", r.rate(), r.cpuPerEvent())
}

// noop is a sink that takes every event at once.
type noop struct{}

func (noop) Publish(context.Context, store.Event) (deliver.Published, error) {
	return deliver.Published{}, nil
}
func (noop) Close() {}

// runPlain publishes n events from conc goroutines with the plain client.
func runPlain(t target, n, conc int) result {
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0, start := cpuNow(), time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				check(t.plain(ctx, i), t.name+" plain publish")
				cancel()
			}
		}()
	}
	wg.Wait()
	return result{events: n, wall: time.Since(start), cpu: cpuNow() - cpu0}
}

// runReceiver claims n events for one sink into the ledger st (not timed), then times the
// receiver's delivery pool with conc workers handing them to the sink until none is left.
func runReceiver(t target, st store.Store, n, conc int) result {
	return runPool(map[string]deliver.Sink{"bus": {Name: "bus", Publisher: t.sink, HTTP: t.http}}, st, n, conc)
}

// runs numbers the pools run, so that each claims events of its own subscription (a
// PostgreSQL ledger is shared by the runs, also of earlier processes: started tells them
// apart).
var (
	runs    atomic.Int64
	started = time.Now().Unix()
)

// runPool is runReceiver with every event going to each of sinks (fan-out). It closes st.
func runPool(sinks map[string]deliver.Sink, st store.Store, n, conc int) result {
	defer st.Close()
	ctx := context.Background()
	sub := fmt.Sprintf("bench/orders-%d-%d", started, runs.Add(1))
	for from := 0; from < n; from += 500 {
		var batch []store.Event
		for i := from; i < min(from+500, n); i++ {
			batch = append(batch, store.Event{Subscription: sub, SubscriptionUID: "bench-uid", EventID: eventID("r", i), EventType: "invoice.paid",
				ContentType: "application/json", Payload: payload(i), ReceivedAt: time.Now(), MaxAttempts: 10, Sinks: slices.Sorted(maps.Keys(sinks))})
		}
		dup, err := st.ClaimBatch(ctx, batch)
		check(err, "claiming")
		if slices.Contains(dup, true) {
			check(fmt.Errorf("events of %s already in the ledger", sub), "claiming")
		}
	}
	pool := deliver.New(st, deliver.NewSender(deliver.SenderOptions{Timeout: 10 * time.Second}),
		func(_, name string) (deliver.Sink, bool) { s, ok := sinks[name]; return s, ok },
		deliver.Options{Workers: conc, PollInterval: 5 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	cpu0, start := cpuNow(), time.Now()
	go func() { done <- pool.Run(runCtx) }()
	for {
		d, err := st.Depth(ctx)
		check(err, "depth")
		if d == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond) // the polling costs CPU counted in the row: not too often
	}
	r := result{events: n, wall: time.Since(start), cpu: cpuNow() - cpu0}
	stop()
	check(<-done, "pool")
	return r
}

func natsTarget(dir string) (target, error) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		return target{}, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return target{}, fmt.Errorf("nats-server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return target{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return target{}, err
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}}); err != nil {
		return target{}, err
	}
	sink, err := deliver.NewJetStream([]string{s.ClientURL()}, "bench.orders", deliver.JetStreamAuth{})
	if err != nil {
		return target{}, err
	}
	return target{
		name: "nats (JetStream, file stream, R1)",
		plain: func(ctx context.Context, i int) error {
			msg := nats.NewMsg("bench.orders")
			msg.Data = payload(i)
			msg.Header.Set("ce-id", eventID("p", i))
			_, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID(key("p", i)))
			return err
		},
		sink: sink,
		fanout: func() []deliver.Publisher {
			var out []deliver.Publisher
			for _, subj := range []string{"bench.a", "bench.b", "bench.c"} {
				// Without credentials or TLS material there is nothing that could fail to load.
				p, _ := deliver.NewJetStream([]string{s.ClientURL()}, subj, deliver.JetStreamAuth{})
				out = append(out, p)
			}
			return out
		},
		cleanup: func() { nc.Close(); s.Shutdown() },
	}, nil
}

func amqpTarget() (target, error) {
	const url = "amqp://guest:guest@127.0.0.1:5672/"
	conn, err := amqp.Dial(url)
	if err != nil {
		return target{}, fmt.Errorf("no RabbitMQ on 127.0.0.1:5672: %w", err)
	}
	admin, err := conn.Channel()
	if err != nil {
		return target{}, err
	}
	name := fmt.Sprintf("hw-bench-%d", time.Now().UnixNano())
	if err := admin.ExchangeDeclare(name, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return target{}, err
	}
	if _, err := admin.QueueDeclare(name, true, false, false, false, nil); err != nil {
		return target{}, err
	}
	if err := admin.QueueBind(name, "orders", name, false, nil); err != nil {
		return target{}, err
	}
	// The plain loop shares one confirming channel, as the sink does.
	ch, err := conn.Channel()
	if err != nil {
		return target{}, err
	}
	if err := ch.Confirm(false); err != nil {
		return target{}, err
	}
	sink, err := deliver.NewAMQP(url, name, "orders", deliver.TLSMaterial{})
	if err != nil {
		return target{}, err
	}
	return target{
		name: "amqp (RabbitMQ, durable queue, persistent, confirms)",
		plain: func(ctx context.Context, i int) error {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, name, "orders", true, false, amqp.Publishing{
				MessageId: key("p", i), DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: payload(i),
				Headers: amqp.Table{"cloudEvents_id": eventID("p", i)}})
			if err != nil {
				return err
			}
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("not confirmed: %v", err)
			}
			return nil
		},
		sink: sink,
		cleanup: func() {
			sink.Close()
			_, _ = admin.QueueDelete(name, false, false, false)
			_ = admin.ExchangeDelete(name, false, false)
			_ = conn.Close()
		},
	}, nil
}

func kafkaTarget() (target, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "bench"))
	if err != nil {
		return target{}, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return target{}, err
	}
	sink, err := deliver.NewKafka(c.ListenAddrs(), "bench", deliver.KafkaKey{}, deliver.KafkaConfig{})
	if err != nil {
		return target{}, err
	}
	return target{
		name: "kafka (kfake, acks all, idempotent)",
		plain: func(ctx context.Context, i int) error {
			return cl.ProduceSync(ctx, &kgo.Record{Topic: "bench", Key: []byte(eventID("p", i)), Value: payload(i),
				Headers: []kgo.RecordHeader{{Key: "ce_id", Value: []byte(eventID("p", i))}}}).FirstErr()
		},
		sink:    sink,
		cleanup: func() { sink.Close(); cl.Close(); c.Close() },
	}, nil
}

// httpTarget is the reference row: an HTTP sink answering 200 at once on loopback, so the
// receiver's own cost per event (claiming a job, reporting it done in the ledger) shows beside
// a plain POST loop.
func httpTarget() (target, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	cl := &http.Client{Transport: tr}
	t, err := deliver.NewHTTPTarget(srv.URL, nil, deliver.HTTPAuth{}, nil)
	if err != nil {
		return target{}, err
	}
	return target{
		name: "http (reference: a no-op loopback server)",
		plain: func(ctx context.Context, i int) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(payload(i)))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key("p", i))
			resp, err := cl.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.Body.Close()
		},
		http:    t,
		cleanup: srv.Close,
	}, nil
}
