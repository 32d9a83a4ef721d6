package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StartNATS runs an embedded nats-server with JetStream on 127.0.0.1 (port server.RANDOM_PORT:
// a free one), storing in dir, until the test ends or it is shut down.
func StartNATS(tb testing.TB, dir string, port int) *server.Server {
	tb.Helper()
	return StartNATSWith(tb, &server.Options{Port: port, StoreDir: dir})
}

// StartNATSWith runs an embedded nats-server with JetStream and the options o (TLS, trusted
// operators and an account resolver, ...) on 127.0.0.1, until the test ends or it is shut down.
func StartNATSWith(tb testing.TB, o *server.Options) *server.Server {
	tb.Helper()
	o.Host, o.JetStream, o.NoLog, o.NoSigs = "127.0.0.1", true, true, true
	s, err := server.NewServer(o)
	if err != nil {
		tb.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server not ready")
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// Stream connects to s and creates (or finds) the stream name capturing subjects; it returns the
// stream and the connection (closed when the test ends).
func Stream(tb testing.TB, s *server.Server, name string, subjects ...string) (jetstream.Stream, *nats.Conn) {
	tb.Helper()
	return StreamAt(tb, s.ClientURL(), nil, name, subjects...)
}

// StreamAt is Stream for a server at url that needs the connection options opts (TLS,
// credentials).
func StreamAt(tb testing.TB, url string, opts []nats.Option, name string, subjects ...string) (jetstream.Stream, *nats.Conn) {
	tb.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: subjects})
	if err != nil {
		tb.Fatal(err)
	}
	return st, nc
}
