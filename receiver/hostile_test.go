package receiver_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// randomID is n random characters: incompressible, so PostgreSQL cannot shrink the index
// entry under its row limit.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

// Issue 12, defect 1: one event the database cannot store, sent beside valid ones, made
// PostgreSQL fail the whole claim batch, so the valid deliveries got 503. Now it is refused
// before it joins a batch; TestBatcherIsolatesRefusedClaim covers a claim the database
// refuses for a reason the receiver did not foresee.
func TestHostileEventDoesNotFailItsBatch(t *testing.T) {
	const rounds, valid = 5, 40
	inputs := []struct{ name, id string }{
		{"NUL id", "evt_nul_\x00_id"},
		{"10 KB random id", "evt_" + randomID(10<<10)},
	}
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, kind)
			for _, in := range inputs {
				var (
					mu       sync.Mutex
					validOK  int
					validBad = map[string]int{}
					hostile  = map[string]int{}
					acked    []delivery
				)
				bad := stripeDelivery(s.now, []byte(in.id), []byte("invoice.paid"), []byte("hostile"))
				for round := range rounds {
					start := make(chan struct{})
					var wg sync.WaitGroup
					for i := range valid {
						d := stripeDelivery(s.now, fmt.Appendf(nil, "evt_%s_%d_%d", strings.Fields(in.name)[0], round, i), []byte("invoice.paid"), []byte("valid"))
						wg.Go(func() {
							<-start
							a := s.post(t, d)
							mu.Lock()
							defer mu.Unlock()
							if a.acked() {
								validOK++
								acked = append(acked, d)
							} else {
								validBad[a.String()]++
							}
						})
						if i == valid/2 { // in the middle of the crowd, where batches are large
							wg.Go(func() {
								<-start
								a := s.post(t, bad)
								mu.Lock()
								hostile[a.String()]++
								mu.Unlock()
							})
						}
					}
					close(start)
					wg.Wait()
				}
				reached := s.claims.batchesWith(bad.id)
				fmt.Printf("REPORT hostile-batch %s, %s: %d rounds of %d valid deliveries beside one hostile: valid answered 2xx=%d/%d, otherwise %v; the hostile one answered %v, reached a claim batch %d times\n",
					kind, in.name, rounds, valid, validOK, rounds*valid, validBad, hostile, reached)
				if reached != 0 {
					t.Errorf("%s: the hostile event reached %d claim batches, want none: it is refused before the commit", in.name, reached)
				}
				if validOK != rounds*valid {
					t.Errorf("%s: %d of %d valid deliveries answered 2xx (others: %v), want all", in.name, validOK, rounds*valid, validBad)
				}
				for a := range hostile {
					if !strings.HasPrefix(a, "422 ") {
						t.Errorf("%s: the hostile delivery was answered %s, want 422 invalid_event (it can never be stored)", in.name, a)
					}
				}
				for _, d := range acked {
					s.checkDelivered(t, d)
				}
			}
		})
	}
}

// Issue 12, defect 2: an event id or type that is not a valid HTTP header value was
// acknowledged and then never delivered. Now what valid UTF-8 permits is carried
// percent-encoded, and what no store can hold is refused before anything is stored.
func TestEventsAreCarriedOrRefused(t *testing.T) {
	carried := []struct{ name, id, typ string }{
		{"CRLF in id and type", "evt_crlf\r\nX-Injected: yes", "invoice.paid\r\n"},
		{"control characters", "evt_ctl_\x01\x1f\x7f\t", "invoice.\x1bpaid"},
		{"non-ASCII, space, quote", `évènement ☃ "quoted"`, "café.paid"},
		{"percent signs stay literal", "evt_%41%2", "100%"},
		{"1024-byte id, 256-byte type", randomID(1024), strings.Repeat("t", 256)},
	}
	refused := []struct {
		name string
		d    func(now time.Time) delivery
	}{
		{"NUL in id", func(now time.Time) delivery {
			return stripeDelivery(now, []byte("evt_\x00"), []byte("invoice.paid"), nil)
		}},
		{"NUL in type", func(now time.Time) delivery {
			return stripeDelivery(now, []byte("evt_nul_type"), []byte("invoice\x00paid"), nil)
		}},
		{"id over 1024 bytes", func(now time.Time) delivery {
			return stripeDelivery(now, []byte("evt_"+randomID(1021)), []byte("invoice.paid"), nil)
		}},
		{"type over 256 bytes", func(now time.Time) delivery {
			return stripeDelivery(now, []byte("evt_long_type"), []byte(strings.Repeat("t", 257)), nil)
		}},
		{"invalid UTF-8 id (GitHub header)", func(time.Time) delivery {
			return githubDelivery("\xff\xfe-delivery", "push", []byte(`{}`))
		}},
		{"invalid UTF-8 type (GitHub header)", func(time.Time) delivery {
			return githubDelivery("0f0c6f3e-invalid-type", "push\xc3", []byte(`{}`))
		}},
		{"invalid UTF-8 Content-Type", func(now time.Time) delivery {
			d := stripeDelivery(now, []byte("evt_bad_content_type"), []byte("invoice.paid"), nil)
			d.header.Set("Content-Type", "application/json; charset=\xff")
			return d
		}},
	}
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, kind)
			var carriedReport, refusedReport []string
			defer func() {
				fmt.Printf("REPORT hostile-carry %s: %s\n", kind, strings.Join(carriedReport, "; "))
				fmt.Printf("REPORT hostile-refuse %s: %s\n", kind, strings.Join(refusedReport, "; "))
			}()
			for _, c := range carried {
				d := stripeDelivery(s.now, []byte(c.id), []byte(c.typ), []byte(c.name))
				a := s.post(t, d)
				got, dead := s.outcome(t, d, 10*time.Second)
				outcome := fmt.Sprintf("delivered %d×, ce-id decodes to the id: %t", len(got), len(got) > 0 && got[0].id == d.id)
				if dead != "" {
					outcome = "dead letter: " + dead
				}
				carriedReport = append(carriedReport, fmt.Sprintf("%s → %v, %s", c.name, a, outcome))
				if a.status != 202 {
					t.Errorf("%s: answered %v, want 202", c.name, a)
					continue
				}
				s.checkDelivered(t, d)
			}
			for _, c := range refused {
				d := c.d(s.now)
				a := s.post(t, d)
				reached := s.claims.batchesWith(d.id)
				refusedReport = append(refusedReport, fmt.Sprintf("%s → %v (in %d claim batches)", c.name, a, reached))
				if a.status != 422 || a.result != "invalid_event" {
					t.Errorf("%s: answered %v, want 422 invalid_event", c.name, a)
				}
				if reached != 0 {
					t.Errorf("%s: the refused event reached the store (%d claim batches)", c.name, reached)
				}
			}
			// The sink answered; the worker records the completion just after.
			deadline := time.Now().Add(10 * time.Second)
			for s.depth(t) != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := s.depth(t); n != 0 {
				t.Errorf("%d jobs still queued, want 0: every carried event delivered, no refused one stored", n)
			}
			if len(s.sink.problems) > 0 {
				t.Errorf("sink: %v", s.sink.problems)
			}
		})
	}
}

// Issue 5: a body naming its event id twice was accepted, deduped on one of the two (which
// one depended on the decoder). Now an event id or type that can be read two ways is refused,
// 422 invalid_event, on every store, and neither reading is recorded.
func TestAmbiguousEventsAreRefused(t *testing.T) {
	signed := func(now time.Time, body string) delivery {
		d := stripeDelivery(now, nil, nil, nil)
		d.body = []byte(body)
		d.header.Set("Stripe-Signature", stripe.SignHeader(stackSecret, now, d.body))
		return d
	}
	cases := []struct {
		name string
		d    func(now time.Time) delivery
		ids  []string // every id a decoder could read from it
	}{
		{"id twice", func(now time.Time) delivery {
			return signed(now, `{"id":"evt_amb_1","object":"event","id":"evt_amb_2","type":"invoice.paid"}`)
		}, []string{"evt_amb_1", "evt_amb_2"}},
		{"id twice, once escaped", func(now time.Time) delivery {
			return signed(now, `{"id":"evt_amb_3","\u0069d":"evt_amb_4","type":"invoice.paid"}`)
		}, []string{"evt_amb_3", "evt_amb_4"}},
		{"id and ID", func(now time.Time) delivery {
			return signed(now, `{"ID":"evt_amb_5","id":"evt_amb_6","type":"invoice.paid"}`)
		}, []string{"evt_amb_5", "evt_amb_6"}},
		{"type twice", func(now time.Time) delivery {
			return signed(now, `{"id":"evt_amb_7","type":"invoice.paid","type":"invoice.voided"}`)
		}, []string{"evt_amb_7"}},
		{"X-GitHub-Delivery twice", func(time.Time) delivery {
			d := githubDelivery("amb-guid-1", "push", []byte(`{"ambiguous":true}`))
			d.header.Add(github.DeliveryHeader, "amb-guid-2")
			return d
		}, []string{"amb-guid-1", "amb-guid-2"}},
	}
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, kind)
			var report []string
			for _, c := range cases {
				a := s.post(t, c.d(s.now))
				reached := 0
				for _, id := range c.ids {
					reached += s.claims.batchesWith(id)
				}
				report = append(report, fmt.Sprintf("%s → %s (in %d claim batches)", c.name, a.wire(), reached))
				if a != (answer{422, "invalid_event"}) || reached != 0 {
					t.Errorf("%s: %v, in %d claim batches; want 422 invalid_event and none", c.name, a, reached)
				}
			}
			fmt.Printf("REPORT ambiguous %s: %s\n", kind, strings.Join(report, "; "))
			if n := s.depth(t); n != 0 {
				t.Errorf("%d jobs queued, want 0", n)
			}
			// Neither reading was recorded: each id alone is a new event.
			for _, id := range []string{"evt_amb_1", "evt_amb_2"} {
				if a := s.post(t, stripeDelivery(s.now, []byte(id), []byte("invoice.paid"), nil)); a.status != 202 {
					t.Errorf("%s alone after the refusal: %v, want 202", id, a)
				}
			}
		})
	}
}
