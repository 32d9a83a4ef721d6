package fake_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/providers/github/fake"
)

// clock is a settable clock for the fake (delivered_at, the redelivery window).
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// receiver answers every delivery with its current status and records the deliveries whose
// X-Hub-Signature-256 verifies with its secret.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	secret string
	got    []received
}

type received struct {
	guid, event string
	signed      bool
	body        string
}

func newReceiver(t *testing.T, secret string) *receiver {
	rv := &receiver{status: http.StatusOK, secret: secret}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rv.mu.Lock()
		defer rv.mu.Unlock()
		rv.got = append(rv.got, received{
			guid: r.Header.Get("X-GitHub-Delivery"), event: r.Header.Get("X-GitHub-Event"),
			signed: r.Header.Get("X-Hub-Signature-256") == sign(rv.secret, b), body: string(b),
		})
		w.WriteHeader(rv.status)
		_, _ = io.WriteString(w, "answered "+strconv.Itoa(rv.status))
	}))
	t.Cleanup(rv.Close)
	return rv
}

func (rv *receiver) answer(status int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.status = status
}

func (rv *receiver) received() []received {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.got)
}

// closedURL is a URL nobody listens on: deliveries to it get no answer (status_code 0).
func closedURL(t *testing.T) string {
	hs := httptest.NewServer(http.NotFoundHandler())
	u := hs.URL
	hs.Close()
	return u + "/down"
}

type item struct {
	ID           int64   `json:"id"`
	GUID         string  `json:"guid"`
	DeliveredAt  string  `json:"delivered_at"`
	Redelivery   bool    `json:"redelivery"`
	Status       string  `json:"status"`
	StatusCode   int     `json:"status_code"`
	Event        string  `json:"event"`
	Action       *string `json:"action"`
	RepositoryID *int64  `json:"repository_id"`
}

// pages lists path's deliveries following Link rel="next" and returns the items and the pages.
func (c *tc) pages(path string) ([]item, int) {
	c.t.Helper()
	var all []item
	n := 0
	for u := path; u != ""; n++ {
		a := c.do("GET", u, tok, "")
		if a.status != http.StatusOK {
			c.t.Fatalf("GET %s: %d %s", u, a.status, a.body)
		}
		var page []item
		a.json(c.t, &page)
		all = append(all, page...)
		u = ""
		if l := a.header.Get("Link"); l != "" {
			next := strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
			u = strings.TrimPrefix(next, c.url)
		}
	}
	return all, n
}

func hookPath(target string, id int64) string {
	return "/" + target + "/hooks/" + strconv.FormatInt(id, 10)
}

// TestDeliveryLog emits events to a hook whose endpoint answers 200, 502 or nothing, on a
// repository and an organization, and reads the log back through the API: newest first, cursor
// pages, the status classes of GitHub's description, and one delivery with its request.
func TestDeliveryLog(t *testing.T) {
	for _, target := range []string{repo, org} {
		t.Run(target, func(t *testing.T) {
			c := serve(t, fake.WithClock(newClock().Now))
			rv := newReceiver(t, "s3")
			h := c.srv.Seed(target, fake.Hook{Active: true, Events: []string{"issues", "push"}, Config: fake.Config{URL: rv.URL, ContentType: "json", Secret: "s3"}})
			down := closedURL(t)

			// 4 answered 200, 3 answered 502, 2 not answered at all.
			var want []string
			emit := func(status int) {
				t.Helper()
				if status == 0 {
					c.srv.Edit(target, h.ID, func(x *fake.Hook) { x.Config.URL = down })
				} else {
					c.srv.Edit(target, h.ID, func(x *fake.Hook) { x.Config.URL = rv.URL })
					rv.answer(status)
				}
				ds, err := c.srv.Emit(target, "issues", []byte(`{"action":"opened","issue":{"number":`+strconv.Itoa(len(want))+`},"repository":{"id":77}}`))
				if err != nil || len(ds) != 1 || ds[0].Code != status {
					t.Fatalf("Emit = %+v, %v; want one delivery answered %d", ds, err, status)
				}
				want = append(want, ds[0].GUID)
			}
			for _, st := range []int{200, 502, 0, 200, 502, 200, 0, 502, 200} {
				emit(st)
			}
			slices.Reverse(want) // newest first

			base := hookPath(target, h.ID) + "/deliveries"
			all, n := c.pages(base + "?per_page=4")
			var guids []string
			for i, it := range all {
				guids = append(guids, it.GUID)
				if i > 0 && it.ID >= all[i-1].ID {
					t.Errorf("item %d has id %d after %d: not newest first", i, it.ID, all[i-1].ID)
				}
				if it.Event != "issues" || it.Action == nil || *it.Action != "opened" || it.RepositoryID == nil || *it.RepositoryID != 77 || it.Redelivery {
					t.Errorf("item %+v: want event issues, action opened, repository 77, no redelivery", it)
				}
			}
			if d := cmp.Diff(want, guids); d != "" || n != 3 {
				t.Errorf("%d pages of 4; guids (-want +got):\n%s", n, d)
			}

			count := func(q string) map[int]int {
				items, _ := c.pages(base + "?per_page=100" + q)
				out := map[int]int{}
				for _, it := range items {
					out[it.StatusCode]++
				}
				return out
			}
			// success is status_code 200-399, failure 400-599: no answer is in neither.
			if d := cmp.Diff(map[int]int{200: 4}, count("&status=success")); d != "" {
				t.Errorf("status=success (-want +got):\n%s", d)
			}
			if d := cmp.Diff(map[int]int{502: 3}, count("&status=failure")); d != "" {
				t.Errorf("status=failure (-want +got):\n%s", d)
			}
			if d := cmp.Diff(map[int]int{200: 4, 502: 3, 0: 2}, count("")); d != "" {
				t.Errorf("no status (-want +got):\n%s", d)
			}
			words := map[int]string{}
			for _, it := range all {
				words[it.StatusCode] = it.Status
			}
			if d := cmp.Diff(map[int]string{200: "OK", 502: "Invalid HTTP Response: 502", 0: "failed to connect to host"}, words); d != "" {
				t.Errorf("status words (-want +got):\n%s", d)
			}

			// The oldest delivery, with what was sent and answered.
			a := c.do("GET", base+"/"+strconv.FormatInt(all[len(all)-1].ID, 10), tok, "")
			var one struct {
				item
				URL     string `json:"url"`
				Request struct {
					Headers map[string]string `json:"headers"`
					Payload map[string]any    `json:"payload"`
				} `json:"request"`
				Response struct {
					Payload *string `json:"payload"`
				} `json:"response"`
			}
			a.json(t, &one)
			if a.status != http.StatusOK || one.GUID != want[len(want)-1] || one.URL != rv.URL ||
				one.Request.Headers["X-Github-Delivery"] != one.GUID || one.Request.Headers["X-Github-Hook-Id"] != strconv.FormatInt(h.ID, 10) ||
				!strings.HasPrefix(one.Request.Headers["X-Hub-Signature-256"], "sha256=") || one.Request.Payload["action"] != "opened" ||
				one.Response.Payload == nil || *one.Response.Payload != "answered 200" {
				t.Errorf("GET delivery: %d %s", a.status, a.body)
			}
		})
	}
}

// TestRedelivery: POST .../attempts answers 202 {} and sends the same payload under the same
// guid, signed with the hook's secret as it is now, logged as a redelivery; within 3 days of the
// event's first delivery by the fake's clock, and not after, even for a redelivery made in time.
func TestRedelivery(t *testing.T) {
	for _, target := range []string{repo, org} {
		t.Run(target, func(t *testing.T) {
			clk := newClock()
			c := serve(t, fake.WithClock(clk.Now))
			rv := newReceiver(t, "rotated")
			h := c.srv.Seed(target, fake.Hook{Active: true, Events: []string{"*"}, Config: fake.Config{URL: closedURL(t), ContentType: "json", Secret: "old"}})
			ds, err := c.srv.Emit(target, "push", []byte(`{"ref":"refs/heads/main"}`))
			if err != nil || len(ds) != 1 || ds[0].Code != 0 {
				t.Fatalf("Emit to a closed port = %+v, %v", ds, err)
			}
			orig := ds[0]
			// The receiver is back at another URL, with another secret.
			c.srv.Edit(target, h.ID, func(x *fake.Hook) { x.Config.URL = rv.URL; x.Config.Secret = "rotated" })

			attempts := hookPath(target, h.ID) + "/deliveries/" + strconv.FormatInt(orig.ID, 10) + "/attempts"
			clk.Add(71 * time.Hour)
			if a := c.do("POST", attempts, tok, ""); a.status != http.StatusAccepted || string(a.body) != "{}" {
				t.Fatalf("attempts within 3 days: %d %s", a.status, a.body)
			}
			c.srv.WaitDeliveries()
			want := []received{{guid: orig.GUID, event: "push", signed: true, body: `{"ref":"refs/heads/main"}`}}
			if d := cmp.Diff(want, rv.received(), cmp.AllowUnexported(received{})); d != "" {
				t.Errorf("received (-want +got):\n%s", d)
			}
			log := c.srv.DeliveryLog(target, h.ID)
			if len(log) != 2 || !log[0].Redelivery || log[0].GUID != orig.GUID || log[0].Code != 200 || log[0].ID <= orig.ID ||
				!log[0].Time.Equal(clk.Now()) || log[1].Redelivery {
				t.Errorf("log after the redelivery: %+v", log)
			}

			clk.Add(2 * time.Hour) // 73 h after the first delivery, 2 h after the redelivery
			for _, id := range []int64{orig.ID, log[0].ID} {
				a := c.do("POST", hookPath(target, h.ID)+"/deliveries/"+strconv.FormatInt(id, 10)+"/attempts", tok, "")
				if a.status != http.StatusUnprocessableEntity || !strings.Contains(string(a.body), "older than 3 days") {
					t.Errorf("attempts of delivery %d after 3 days: %d %s, want 422", id, a.status, a.body)
				}
			}
			c.srv.WaitDeliveries()
			if n := len(rv.received()); n != 1 {
				t.Errorf("%d deliveries received, want the one redelivery", n)
			}
			if st := c.srv.Stats(); st.Redeliveries != 3 {
				t.Errorf("Stats().Redeliveries = %d, want 3", st.Redeliveries)
			}
		})
	}
}

func TestRedeliveryWindowOption(t *testing.T) {
	clk := newClock()
	c := serve(t, fake.WithClock(clk.Now), fake.WithRedeliveryWindow(7*24*time.Hour))
	h := c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"push"}, Config: fake.Config{URL: closedURL(t), ContentType: "json"}})
	ds, _ := c.srv.Emit(repo, "push", nil)
	clk.Add(6 * 24 * time.Hour)
	if a := c.do("POST", hookPath(repo, h.ID)+"/deliveries/"+strconv.FormatInt(ds[0].ID, 10)+"/attempts", tok, ""); a.status != http.StatusAccepted {
		t.Errorf("attempts after 6 days with a 7-day window: %d %s", a.status, a.body)
	}
}

// TestEmit delivers one event, under one guid, to the active hooks subscribed to it or to "*".
func TestEmit(t *testing.T) {
	c := serve(t)
	rv := newReceiver(t, "s")
	cfg := fake.Config{URL: rv.URL, ContentType: "json", Secret: "s"}
	push := c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"push"}, Config: cfg})
	all := c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"*"}, Config: cfg})
	c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"issues"}, Config: cfg})
	c.srv.Seed(repo, fake.Hook{Active: false, Events: []string{"push"}, Config: cfg})
	ds, err := c.srv.Emit(repo, "push", []byte(`{"ref":"x"}`))
	if err != nil || len(ds) != 2 || ds[0].HookID != push.ID || ds[1].HookID != all.ID || ds[0].GUID != ds[1].GUID {
		t.Fatalf("Emit = %+v, %v; want hooks %d and %d, one guid", ds, err, push.ID, all.ID)
	}
	got := rv.received()
	if len(got) != 2 || !got[0].signed || !got[1].signed || got[0].guid != ds[0].GUID {
		t.Errorf("received %+v", got)
	}
	if _, err := c.srv.Emit("repos/nobody/nothing", "push", nil); err == nil {
		t.Error("Emit to an unknown target succeeded")
	}
}

// TestDeliveryRoutesRefuse: unknown deliveries and hooks are 404, a delivery of another hook is
// not found through this one, an unreadable cursor is 400, a read-only token cannot redeliver.
func TestDeliveryRoutesRefuse(t *testing.T) {
	c := serveWith(t, false)
	h1 := c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"push"}, Config: fake.Config{URL: closedURL(t), ContentType: "json"}})
	h2 := c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"issues"}, Config: fake.Config{URL: closedURL(t), ContentType: "json"}})
	ds, _ := c.srv.Emit(repo, "push", nil)
	id := strconv.FormatInt(ds[0].ID, 10)
	c.srv.GrantRead("ghp_reader", repo)
	cases := []struct {
		name, method, path, credential string
		status                         int
	}{
		{"unknown delivery", "GET", hookPath(repo, h1.ID) + "/deliveries/999999", tok, 404},
		{"unknown hook", "GET", hookPath(repo, 42) + "/deliveries", tok, 404},
		{"another hook's delivery", "GET", hookPath(repo, h2.ID) + "/deliveries/" + id, tok, 404},
		{"another hook's redelivery", "POST", hookPath(repo, h2.ID) + "/deliveries/" + id + "/attempts", tok, 404},
		{"unreadable cursor", "GET", hookPath(repo, h1.ID) + "/deliveries?cursor=bogus", tok, 400},
		{"unknown status", "GET", hookPath(repo, h1.ID) + "/deliveries?status=pending", tok, 422},
		{"read-only list", "GET", hookPath(repo, h1.ID) + "/deliveries", "ghp_reader", 200},
		{"read-only redelivery", "POST", hookPath(repo, h1.ID) + "/deliveries/" + id + "/attempts", "ghp_reader", 403},
		{"GET attempts", "GET", hookPath(repo, h1.ID) + "/deliveries/" + id + "/attempts", tok, 404},
	}
	for _, k := range cases {
		if a := c.do(k.method, k.path, k.credential, ""); a.status != k.status {
			t.Errorf("%s: %d %s, want %d", k.name, a.status, a.body, k.status)
		}
	}
	if !c.srv.Remove(repo, h1.ID) || c.srv.DeliveryLog(repo, h1.ID) != nil {
		t.Error("a removed hook's delivery log is still there")
	}
}

// TestEmitAtBackdates: an event logged as delivered 80 hours ago, by a clock nobody moved, is
// listed with that delivered_at and is past the redelivery window; one from 70 hours ago is not.
func TestEmitAtBackdates(t *testing.T) {
	clk := newClock()
	c := serve(t, fake.WithClock(clk.Now))
	h := c.srv.Seed(repo, fake.Hook{Active: true, Events: []string{"push"}, Config: fake.Config{URL: closedURL(t), ContentType: "json"}})
	for _, tc := range []struct {
		ago    time.Duration
		status int
	}{{80 * time.Hour, http.StatusUnprocessableEntity}, {70 * time.Hour, http.StatusAccepted}} {
		ds, err := c.srv.EmitAt(clk.Now().Add(-tc.ago), repo, "push", nil)
		if err != nil || len(ds) != 1 || !ds[0].Time.Equal(clk.Now().Add(-tc.ago)) {
			t.Fatalf("EmitAt = %+v, %v", ds, err)
		}
		items, _ := c.pages(hookPath(repo, h.ID) + "/deliveries")
		if items[0].GUID != ds[0].GUID || items[0].DeliveredAt != ds[0].Time.Format(time.RFC3339) {
			t.Errorf("newest listed %+v, want %s delivered at %s", items[0], ds[0].GUID, ds[0].Time)
		}
		if a := c.do("POST", hookPath(repo, h.ID)+"/deliveries/"+strconv.FormatInt(ds[0].ID, 10)+"/attempts", tok, ""); a.status != tc.status {
			t.Errorf("attempts of a delivery %v old: %d %s, want %d", tc.ago, a.status, a.body, tc.status)
		}
	}
}
