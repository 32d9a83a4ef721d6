package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/fakeapi/fakeapitest"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/github/fake"
)

// TestRunServesAndShutsDown checks the binary's contract: it logs the address, serves the
// GitHub API (with deliveries) and the admin API, and returns nil once its context is cancelled.
func TestRunServesAndShutsDown(t *testing.T) {
	var mu sync.Mutex
	var pings []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get(github.SignatureHeader) == github.Sign([]byte("s3cret"), b) {
			mu.Lock()
			pings = append(pings, r.Header.Get(github.EventHeader))
			mu.Unlock()
		}
	}))
	defer rcv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := fakeapitest.Start(ctx, t, "fakegithub", run, "-page-size", "1")

	const tok = "ghp_cmdtest"
	if st := post(t, base+"/_fake/grant", `{"token":"`+tok+`","targets":["repos/octo/hello"]}`, ""); st != http.StatusNoContent {
		t.Fatalf("grant: %d", st)
	}
	if st := post(t, base+"/_fake/grant", `{"token":"x","targets":["users/octo"]}`, ""); st != http.StatusBadRequest {
		t.Errorf("grant of a bad target: %d, want 400", st)
	}
	if st := post(t, base+"/api/v3/repos/octo/hello/hooks", `{"config":{"url":"`+rcv.URL+`","secret":"s3cret","content_type":"json"}}`, tok); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}

	var hooks []fake.Hook
	fakeapitest.GetJSON(t, base+"/_fake/hooks?target=repos/octo/hello", &hooks)
	if len(hooks) != 1 || hooks[0].Config.Secret != "s3cret" {
		t.Fatalf("/_fake/hooks = %+v, want one hook with its secret", hooks)
	}
	body := `{"target":"repos/octo/hello","hook_id":` + jsonInt(hooks[0].ID) + `,"event":"push","payload":{"ref":"refs/heads/main"}}`
	if st := post(t, base+"/_fake/deliver", body, ""); st != http.StatusOK {
		t.Fatalf("deliver: %d", st)
	}
	var reqs []fake.Request
	fakeapitest.GetJSON(t, base+"/_fake/requests", &reqs)
	if len(reqs) != 1 || reqs[0].Token != fake.TokenLabel(tok) || reqs[0].Status != http.StatusCreated {
		t.Errorf("/_fake/requests = %+v", reqs)
	}
	var st fake.Stats
	fakeapitest.GetJSON(t, base+"/_fake/stats", &st)
	if st.Creates != 1 {
		t.Errorf("/_fake/stats = %+v", st)
	}

	var deliveries []fake.Delivery
	fakeapitest.GetJSON(t, base+"/_fake/deliveries", &deliveries)
	if len(deliveries) == 0 || deliveries[len(deliveries)-1].Code != http.StatusOK {
		t.Errorf("/_fake/deliveries = %+v", deliveries)
	}

	cancel() // waits for the ping in flight
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(pings, ",") != "push,ping" && strings.Join(pings, ",") != "ping,push" {
		t.Errorf("signed deliveries %v, want the ping after create and the push", pings)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func post(t *testing.T, u, body, tok string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestEmitAndClock drives the recovery story from a shell's point of view: events emitted to a
// hook nobody answers, the clock moved four days on, and the delivery log and redelivery
// window as the API then reports them.
func TestEmitAndClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := fakeapitest.Start(ctx, t, "fakegithub", run, "-deliveries=false")
	defer func() { cancel(); <-done }()

	const tok = "ghp_cmdclock"
	if st := post(t, base+"/_fake/grant", `{"token":"`+tok+`","targets":["orgs/octo"]}`, ""); st != http.StatusNoContent {
		t.Fatalf("grant: %d", st)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	if st := post(t, base+"/orgs/octo/hooks", `{"name":"web","events":["push"],"config":{"url":"`+downURL+`","content_type":"json"}}`, tok); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}
	var hooks []fake.Hook
	fakeapitest.GetJSON(t, base+"/_fake/hooks?target=orgs/octo", &hooks)

	var before struct{ Now time.Time }
	fakeapitest.GetJSON(t, base+"/_fake/clock", &before)
	if st := post(t, base+"/_fake/emit", `{"target":"orgs/octo","event":"push","payload":{"ref":"a"}}`, ""); st != http.StatusOK {
		t.Fatalf("emit: %d", st)
	}
	if st := post(t, base+"/_fake/emit", `{"target":"orgs/octo","event":"issues"}`, ""); st != http.StatusOK {
		t.Fatalf("emit of an event no hook wants: %d", st)
	}
	if st := post(t, base+"/_fake/emit", `{"target":"users/octo","event":"push"}`, ""); st != http.StatusBadRequest {
		t.Errorf("emit to a bad target: %d, want 400", st)
	}
	if st := post(t, base+"/_fake/clock", `{"advance":"-1h"}`, ""); st != http.StatusBadRequest {
		t.Errorf("clock moved back: %d, want 400", st)
	}
	if st := post(t, base+"/_fake/clock", `{"advance":"96h"}`, ""); st != http.StatusOK {
		t.Fatalf("clock: %d", st)
	}
	var after struct{ Now time.Time }
	fakeapitest.GetJSON(t, base+"/_fake/clock", &after)
	if d := after.Now.Sub(before.Now); d < 96*time.Hour || d > 97*time.Hour {
		t.Errorf("the clock moved %v, want 96h", d)
	}

	var log []fake.Delivery
	fakeapitest.GetJSON(t, base+"/_fake/deliveries?target=orgs/octo&hook_id="+jsonInt(hooks[0].ID), &log)
	if len(log) != 1 || log[0].Event != "push" || log[0].Code != 0 {
		t.Fatalf("delivery log = %+v, want the one push, unanswered", log)
	}
	// Four days later GitHub will not redeliver it.
	if st := post(t, base+"/orgs/octo/hooks/"+jsonInt(hooks[0].ID)+"/deliveries/"+jsonInt(log[0].ID)+"/attempts", "", tok); st != http.StatusUnprocessableEntity {
		t.Errorf("redelivery after 4 days: %d, want 422", st)
	}

	// A backdated event: delivered "two hours ago" by the fake's clock, still redeliverable.
	if st := post(t, base+"/_fake/emit", `{"target":"orgs/octo","event":"push","ago":"2h"}`, ""); st != http.StatusOK {
		t.Fatalf("emit with ago: %d", st)
	}
	if st := post(t, base+"/_fake/emit", `{"target":"orgs/octo","event":"push","ago":"yesterday"}`, ""); st != http.StatusBadRequest {
		t.Errorf("emit with an unreadable ago: %d, want 400", st)
	}
	fakeapitest.GetJSON(t, base+"/_fake/deliveries?target=orgs/octo&hook_id="+jsonInt(hooks[0].ID), &log)
	if d := after.Now.Add(-2 * time.Hour).Sub(log[0].Time); len(log) != 2 || d < -time.Minute || d > time.Minute {
		t.Fatalf("delivery log = %+v, want the backdated push first, about 2h before %v", log, after.Now)
	}
	if st := post(t, base+"/orgs/octo/hooks/"+jsonInt(hooks[0].ID)+"/deliveries/"+jsonInt(log[0].ID)+"/attempts", "", tok); st != http.StatusAccepted {
		t.Errorf("redelivery of a 2-hour-old delivery: %d, want 202", st)
	}
}
