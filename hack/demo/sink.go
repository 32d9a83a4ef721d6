package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// sink is the demo's event consumer: it stands in for the samples' cluster-internal
// spec.delivery.sink URLs. The receiver POSTs each event to it as a CloudEvent (HTTP binary
// mode); the sink answers 200 and records every delivery by its Idempotency-Key and ce-id, so
// the demo can show that each event arrived exactly once, with the body the provider sent.
type sink struct {
	base string
	srv  *http.Server
	done chan error // Serve's result

	mu         sync.Mutex
	byKey      map[string]*sinkEntry // Idempotency-Key → what arrived under it
	byCEID     map[string]int        // ce-source + " " + ce-id → deliveries
	deliveries int
	last       time.Time // when the last delivery arrived
	problems   []string  // malformed deliveries (missing or inconsistent headers)
}

// sinkEntry is one Idempotency-Key's deliveries.
type sinkEntry struct {
	count   int
	ceID    string
	ceType  string
	source  string // ce-source: hookwarden/<namespace>/<name>
	path    string // the URL path it was posted to
	bodySum string // bodySum of the payload
}

// bodySum is the SHA-256 of a body, hex.
func bodySum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// startSink serves the sink on a free 127.0.0.1 port until stop.
func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the sink: %w", err)
	}
	s := &sink{
		base:   "http://" + ln.Addr().String(),
		byKey:  map[string]*sinkEntry{},
		byCEID: map[string]int{},
		done:   make(chan error, 1),
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "reading the body", http.StatusBadRequest)
		return
	}
	key, ceID, source := r.Header.Get("Idempotency-Key"), r.Header.Get("ce-id"), r.Header.Get("ce-source")

	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries++
	s.last = time.Now()
	if key == "" || ceID == "" {
		s.problems = append(s.problems, fmt.Sprintf("a delivery to %s without Idempotency-Key or ce-id (ce-id %q)", r.URL.Path, ceID))
	}
	e := s.byKey[key]
	if e == nil {
		e = &sinkEntry{ceID: ceID, ceType: r.Header.Get("ce-type"), source: source, path: r.URL.Path, bodySum: bodySum(body)}
		s.byKey[key] = e
	} else if e.ceID != ceID || e.source != source {
		s.problems = append(s.problems, fmt.Sprintf("Idempotency-Key %q arrived with ce-id %q from %q and with ce-id %q from %q", key, e.ceID, e.source, ceID, source))
	}
	e.count++
	s.byCEID[source+" "+ceID]++
	w.WriteHeader(http.StatusOK)
}

// sinkView is a consistent copy of what the sink recorded.
type sinkView struct {
	byKey      map[string]sinkEntry
	byCEID     map[string]int
	deliveries int
	last       time.Time
	problems   []string
}

func (s *sink) view() sinkView {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := sinkView{byKey: make(map[string]sinkEntry, len(s.byKey)), byCEID: make(map[string]int, len(s.byCEID)),
		deliveries: s.deliveries, last: s.last, problems: append([]string(nil), s.problems...)}
	for k, e := range s.byKey {
		v.byKey[k] = *e
	}
	for k, n := range s.byCEID {
		v.byCEID[k] = n
	}
	return v
}

// repeated lists the Idempotency-Keys delivered more than once, with their counts.
func (v sinkView) repeated() []string {
	var out []string
	for k, e := range v.byKey {
		if e.count > 1 {
			out = append(out, fmt.Sprintf("%s ×%d", k, e.count))
		}
	}
	sort.Strings(out)
	return out
}

// stop shuts the sink down.
func (s *sink) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// subscriptionOf returns the name in a ce-source "hookwarden/<namespace>/<name>".
func subscriptionOf(source string) string {
	return source[strings.LastIndex(source, "/")+1:]
}
