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
//     sink decodes ce-id, ce-type and Idempotency-Key back to what the provider sent;
//   - a duplicate (200) repeats an accepted event id, or (GitHub, whose signature covers the
//     body only) an accepted body, and sends nothing more to the sink.
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
	accepted := make([]map[string]string, len(stacks)) // per stack: see checkHostile
	for i := range accepted {
		accepted[i] = map[string]string{}
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
// ones, whose ids and GitHub bodies carry prefix, and checks the answers and what reached the
// sink. accepted maps the sink key of every event s acknowledged with 202 so far, and the
// replay key of every GitHub one (githubBodyKey), to the event's id.
func checkHostile(t *testing.T, s *stack, accepted map[string]string, prefix string, id, typ, body []byte) {
	hostile := []delivery{stripeDelivery(s.now, id, typ, body), githubDelivery(string(id), string(typ), body)}
	var valid []delivery
	for k := range 3 {
		valid = append(valid, stripeDelivery(s.now, fmt.Appendf(nil, "evt_%s_%d", prefix, k), []byte("invoice.paid"), []byte("valid")))
	}
	valid = append(valid, githubDelivery(prefix+"-gh", "push", fmt.Appendf(nil, `{"zen":"ok","n":%q}`, prefix)))
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
		key, bodyKey := sinkKey(d.source, d.id), ""
		if d.source == githubSource {
			bodyKey = githubBodyKey(d.body)
		}
		switch a.status {
		case 202:
			_, seen := accepted[key]
			if _, replayed := accepted[bodyKey]; seen || bodyKey != "" && replayed {
				t.Errorf("%s: %q accepted twice (by its id or its signed body)", s.kind, d.id)
				return
			}
			accepted[key] = d.id
			if bodyKey != "" {
				accepted[bodyKey] = d.id
			}
			s.checkDelivered(t, d)
		case 200:
			first, seen := accepted[key]
			if !seen && bodyKey != "" {
				first, seen = accepted[bodyKey]
			}
			if !seen {
				t.Errorf("%s: %q answered duplicate of an event never accepted", s.kind, d.id)
				return
			}
			if got := len(s.sink.arrivals(d.source, first)); got != 1 {
				t.Errorf("%s: duplicate %q of %q: the event reached the sink %d times, want once", s.kind, d.id, first, got)
			}
			if first != d.id {
				if got := len(s.sink.arrivals(d.source, d.id)); got != 0 {
					t.Errorf("%s: %q, a replay of %q's signed body, reached the sink %d times, want never", s.kind, d.id, first, got)
				}
			}
		}
	}
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	if len(s.sink.problems) > 0 {
		t.Errorf("%s sink: %v", s.kind, s.sink.problems)
	}
}

// githubBodyKey is the accepted map's key of a GitHub body: the receiver dedupes on it too.
func githubBodyKey(body []byte) string { return "github body\x00" + string(body) }
