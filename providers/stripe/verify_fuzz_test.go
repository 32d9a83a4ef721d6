package stripe_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

// FuzzStripeHeader checks that, for any header and body, Verify does not panic, accepts nothing
// stripe-go would not also accept as correctly signed, never echoes the secret, and that a
// delivery signed with SignHeader inside the tolerance always verifies.
func FuzzStripeHeader(f *testing.F) {
	ts := strconv.FormatInt(sigNow.Unix(), 10)
	good := sigV1(sigSecret, sigNow, sigBody)
	for _, h := range []string{
		"t=" + ts + ",v1=" + good,
		"t=" + ts + ",v1=" + good + ",v0=" + good,
		"t=" + ts + ", v1=" + good,
		"t=" + ts + ",v1=" + strings.Repeat("0", 64) + ",v1=" + good,
		"v1=" + good,
		"t=,v1=",
		"=,=,",
		"",
	} {
		f.Add(h, sigBody, int64(0), "evt_seed")
	}
	f.Add("t=-9223372036854775808,v1="+good, []byte("{}"), int64(-1), "")
	f.Add("t=9223372036854775807,v1="+good, []byte(`{"id":1}`), int64(1<<40), "x")

	secrets := [][]byte{[]byte(sigOtherSecret), []byte(sigSecret)}
	v := stripe.NewVerifier()

	f.Fuzz(func(t *testing.T, header string, body []byte, skew int64, id string) {
		// Arbitrary header and body.
		got, err := v.Verify(providers.Delivery{Header: sigHeader(header), Body: body, Now: sigNow}, secrets)
		if err == nil {
			if webhook.ValidatePayloadIgnoringTolerance(body, header, sigSecret) != nil &&
				webhook.ValidatePayloadIgnoringTolerance(body, header, sigOtherSecret) != nil {
				t.Fatalf("accepted a header stripe-go finds unsigned: %q", header)
			}
			if got.EventID == "" {
				t.Fatalf("accepted with an empty EventID")
			}
		} else {
			providerstest.CheckRefusal(t, err, secrets)
		}

		// A correctly signed delivery inside the tolerance always verifies.
		offset := time.Duration(skew%301) * time.Second // within ±300 s
		signedAt := sigNow.Add(offset)
		id = strings.ToValidUTF8(id, "?") // json.Marshal would rewrite invalid UTF-8
		event, _ := json.Marshal(map[string]string{"id": "evt_" + id, "type": "fuzz"})
		got, err = v.Verify(providers.Delivery{Header: sigHeader(stripe.SignHeader(sigSecret, signedAt, event)), Body: event, Now: sigNow}, secrets)
		if err != nil {
			t.Fatalf("correctly signed delivery (t offset %s) refused: %v", offset, err)
		}
		if want := "evt_" + id; got.EventID != want {
			t.Fatalf("EventID = %q, want %q", got.EventID, want)
		}

		// A correctly signed arbitrary body fails, if at all, only for want of an id.
		if _, err := v.Verify(providers.Delivery{Header: sigHeader(stripe.SignHeader(sigSecret, signedAt, body)), Body: body, Now: sigNow}, secrets); err != nil && !errors.Is(err, providers.ErrNoEventID) {
			t.Fatalf("correctly signed body refused with %v", err)
		}
	})
}
