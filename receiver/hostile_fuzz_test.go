package receiver_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/hookwarden/hookwarden/receiver/store/storetest"
)

// FuzzHostileDeliveries drives whole receivers, on SQLite, PostgreSQL and Redis, with validly
// signed deliveries whose event id, type and body are the fuzzer's bytes (once in a Stripe
// body, once in GitHub's headers, where they may be any bytes at all), each sent together with
// valid deliveries so that they share claim batches. It checks:
//   - every answer is 2xx, 4xx, or a 503 that a retry turns into 2xx;
//   - every valid delivery is accepted (202) and reaches the sink exactly once;
//   - every acknowledged event reaches the sink exactly once, none is dead-lettered, and the
//     sink decodes ce-id, ce-type and Idempotency-Key back to what the provider sent.
//
// The seeds are issue 12's inputs; `make test` runs them, `make fuzz` fuzzes.
func FuzzHostileDeliveries(f *testing.F) {
	f.Add([]byte("evt_nul_\x00_id"), []byte("invoice.paid"), []byte(`{}`))
	f.Add([]byte("evt_"+randomID(10<<10)), []byte("invoice.paid"), []byte(`{}`))
	f.Add([]byte("evt_crlf\r\nX-Injected: yes"), []byte("invoice.paid\r\n"), []byte("body\r\n"))
	f.Add([]byte("\xff\xfe-delivery"), []byte("push\xc3"), []byte("\x00\x01\xff"))
	f.Add([]byte(` évènement %41 "q" `), []byte(""), []byte(`{"id":"inner"}`))
	f.Add([]byte(""), []byte("invoice.paid"), []byte(""))

	// A slot database: fuzzing workers are killed when fuzzing ends, before their cleanups.
	stacks := []*stack{newStack(f, "sqlite"), newStackOn(f, "postgres", storetest.PostgresSlotDSN(f, "receiver_fuzz")), newStack(f, "redis")}
	// Valid ids carry a per-process token the fuzzer cannot produce, so no hostile id
	// collides with one.
	var token [8]byte
	_, _ = rand.Read(token[:])
	tok := hex.EncodeToString(token[:])
	accepted := make([]map[string]bool, len(stacks)) // per stack: every event acknowledged 202 so far
	for i := range accepted {
		accepted[i] = map[string]bool{}
	}
	n := 0

	f.Fuzz(func(t *testing.T, id, typ, body []byte) {
		n++
		var wg sync.WaitGroup
		for i, s := range stacks {
			wg.Go(func() { checkHostile(t, s, accepted[i], fmt.Sprintf("%s_%d", tok, n), id, typ, body) })
		}
		wg.Wait()
	})
}

// checkHostile sends the hostile deliveries made of id, typ and body to s together with valid
// ones, whose ids start with prefix, and checks the answers and what reached the sink.
// accepted holds the sink keys of every event s acknowledged with 202 so far.
func checkHostile(t *testing.T, s *stack, accepted map[string]bool, prefix string, id, typ, body []byte) {
	hostile := []delivery{stripeDelivery(s.now, id, typ, body), githubDelivery(string(id), string(typ), body)}
	var valid []delivery
	for k := range 3 {
		valid = append(valid, stripeDelivery(s.now, fmt.Appendf(nil, "evt_%s_%d", prefix, k), []byte("invoice.paid"), []byte("valid")))
	}
	valid = append(valid, githubDelivery(prefix+"-gh", "push", []byte(`{"zen":"ok"}`)))
	all := append(valid, hostile...)
	answers := make([]answer, len(all))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, d := range all {
		wg.Go(func() {
			<-start
			a := s.serve(d)
			for try := 0; a.status == 503 && try < 3; try++ {
				a = s.serve(d)
			}
			answers[i] = a
		})
	}
	close(start)
	wg.Wait()

	for i, d := range all {
		a := answers[i]
		switch {
		case a.status == 503:
			t.Errorf("%s: %q (type %q) still answered %v after retries", s.kind, d.id, d.typ, a)
			return
		case a.status >= 500 || a.status < 200 || (a.status >= 300 && a.status < 400):
			t.Errorf("%s: %q (type %q) answered %v, want 2xx or 4xx", s.kind, d.id, d.typ, a)
			return
		case i < len(valid) && a.status != 202:
			t.Errorf("%s: valid delivery %q answered %v beside hostile id %q, want 202", s.kind, d.id, a, id)
			return
		}
		key := sinkKey(d.source, d.id)
		switch a.status {
		case 202:
			if accepted[key] {
				t.Errorf("%s: %q accepted twice", s.kind, d.id)
				return
			}
			accepted[key] = true
			s.checkDelivered(t, d)
		case 200:
			if !accepted[key] {
				t.Errorf("%s: %q answered duplicate of an event never accepted", s.kind, d.id)
				return
			}
			if got := len(s.sink.arrivals(d.source, d.id)); got != 1 {
				t.Errorf("%s: duplicate %q: the event reached the sink %d times, want once", s.kind, d.id, got)
			}
		}
	}
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	if len(s.sink.problems) > 0 {
		t.Errorf("%s sink: %v", s.kind, s.sink.problems)
	}
}
