package receiver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/hookwarden/hookwarden/internal/logkeys"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/stripe"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/receiver/store"
)

// The receiver's log lines carry the keys the manager uses for the same things (subscription
// as namespace/name, eventID, reason), at the level their cause deserves: an event no store
// can hold is the sender's problem (info), a store that does not commit is ours (error). The
// logger is cmd/receiver's: zap's flags at their defaults (production JSON).
func TestLogKeysAndLevels(t *testing.T) {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	opts := zap.Options{}
	opts.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts.DestWriter = &out
	now := time.Unix(1_800_000_000, 0)
	routes := receiver.NewRoutes()
	routes.Set(receiver.Route{Namespace: "shop", Name: "orders", UID: "uid-1", Provider: "stripe", Secrets: [][]byte{[]byte(oldSecret)}})
	h := &receiver.Handler{
		Routes: routes, Verifiers: map[string]providers.Verifier{"stripe": stripe.NewVerifier()}, Claims: checkingClaimer{},
		MaxBody: 4 << 10, ClaimTimeout: time.Second, Metrics: receiver.NewMetrics(prometheus.NewRegistry()),
		Log: zap.New(zap.UseFlagOptions(&opts)), Now: func() time.Time { return now },
	}
	for _, body := range [][]byte{[]byte(`{"id":"evt_\u0000","type":"invoice.paid"}`), event("evt_store_down")} {
		req := httptest.NewRequest(http.MethodPost, "/hooks/shop/orders", bytes.NewReader(body))
		req.Header.Set("Stripe-Signature", stripe.SignHeader(oldSecret, now, body))
		h.Mux().ServeHTTP(httptest.NewRecorder(), req)
	}
	want := map[string]string{ // message: level
		"delivery refused: the event cannot be recorded": "info",
		"recording the delivery failed":                  "error",
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Text())
		}
		msg, _ := l["msg"].(string)
		level, ok := want[msg]
		if !ok {
			continue
		}
		delete(want, msg)
		if l["level"] != level {
			t.Errorf("%q logged at %v, want %s", msg, l["level"], level)
		}
		if l[logkeys.Subscription] != "shop/orders" {
			t.Errorf("%q: %s=%v, want shop/orders", msg, logkeys.Subscription, l[logkeys.Subscription])
		}
		if id, _ := l[logkeys.EventID].(string); id == "" {
			t.Errorf("%q has no %s: %s", msg, logkeys.EventID, sc.Text())
		}
		if level == "info" && l[logkeys.Reason] == nil {
			t.Errorf("%q has no %s: %s", msg, logkeys.Reason, sc.Text())
		}
	}
	for msg := range want {
		t.Errorf("no %q line in:\n%s", msg, out.String())
	}
}

// checkingClaimer refuses what every store refuses (store.CheckEvent) and fails the rest, as a
// store that is down does.
type checkingClaimer struct{}

func (checkingClaimer) Claim(ctx context.Context, e store.Event) (bool, error) {
	if err := store.CheckEvent(e); err != nil {
		return false, err
	}
	return failingClaimer{}.Claim(ctx, e)
}
