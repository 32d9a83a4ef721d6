package stripe_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/stripe"
)

const (
	sigSecret      = "whsec_hookwardenLeakCanarySigningSecret0123"
	sigOtherSecret = "whsec_hookwardenRotatedSigningSecret456789"
)

// sigNow is the receiver's clock in the table tests.
var sigNow = time.Unix(1_700_000_000, 0)

// sigBody is a Stripe event with an api_version stripe-go v76 would reject: the verifier must not
// care.
var sigBody = []byte(`{"id":"evt_1OhookwardenTest","object":"event","api_version":"2020-08-27","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`)

// stripeGoHeader signs like Stripe does, through stripe-go's own test helper.
func stripeGoHeader(secret string, t time.Time, body []byte) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: t}).Header
}

// sigV1 returns the hex signature stripe-go computes.
func sigV1(secret string, t time.Time, body []byte) string {
	return fmt.Sprintf("%x", webhook.ComputeSignature(t, body, secret))
}

func sigHeader(values ...string) http.Header {
	h := http.Header{}
	for _, v := range values {
		h.Add(stripe.SignatureHeader, v)
	}
	return h
}

func TestVerify(t *testing.T) {
	ts := strconv.FormatInt(sigNow.Unix(), 10)
	good := sigV1(sigSecret, sigNow, sigBody)
	wantEvent := providers.Verified{EventID: "evt_1OhookwardenTest", EventType: "invoice.paid"}

	cases := []struct {
		name     string
		reason   string
		verifier *stripe.Verifier
		header   http.Header
		body     []byte
		secrets  []string
		want     providers.Verified
		wantErr  error
	}{
		{
			name:   "signed by stripe-go",
			reason: "a payload signed by stripe-go's GenerateTestSignedPayload is what Stripe sends",
			header: sigHeader(stripeGoHeader(sigSecret, sigNow, sigBody)),
			want:   wantEvent,
		},
		{
			name:   "signed by SignHeader",
			reason: "the receiver's tests and the demo sign with SignHeader",
			header: sigHeader(stripe.SignHeader(sigSecret, sigNow, sigBody)),
			want:   wantEvent,
		},
		{
			name:    "tampered body",
			reason:  "one changed byte must break the signature",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, sigBody)),
			body:    []byte(strings.Replace(string(sigBody), "invoice.paid", "invoice.paie", 1)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "body re-serialized",
			reason:  "the signature covers the raw bytes, so re-encoded JSON does not verify",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, sigBody)),
			body:    append(append([]byte{}, sigBody...), '\n'),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "wrong secret",
			reason:  "a delivery signed for another endpoint must be refused",
			header:  sigHeader(stripeGoHeader(sigOtherSecret, sigNow, sigBody)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "secret without whsec_ prefix",
			reason:  "Stripe keys the HMAC with the whole secret string, prefix included",
			header:  sigHeader(stripeGoHeader(strings.TrimPrefix(sigSecret, "whsec_"), sigNow, sigBody)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:   "exactly the tolerance old",
			reason: "t = now-300s is still inside the 300 s window",
			header: sigHeader(stripeGoHeader(sigSecret, sigNow.Add(-300*time.Second), sigBody)),
			want:   wantEvent,
		},
		{
			name:    "one second too old",
			reason:  "t = now-301s is outside the window: a replay or a late retry signed long ago",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow.Add(-301*time.Second), sigBody)),
			wantErr: providers.ErrTooOld,
		},
		{
			name:   "exactly the skew in the future",
			reason: "t = now+300s is inside the default future skew",
			header: sigHeader(stripeGoHeader(sigSecret, sigNow.Add(300*time.Second), sigBody)),
			want:   wantEvent,
		},
		{
			name:    "one second too far in the future",
			reason:  "stripe-go accepts any future t; we bound it at 300 s",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow.Add(301*time.Second), sigBody)),
			wantErr: providers.ErrTooNew,
		},
		{
			name:    "old and forged",
			reason:  "the signature is checked first, so a forged old delivery is a bad signature, not a clock problem",
			header:  sigHeader(stripeGoHeader(sigOtherSecret, sigNow.Add(-time.Hour), sigBody)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:     "custom tolerance",
			reason:   "WithTolerance narrows the past window",
			verifier: stripe.NewVerifier(stripe.WithTolerance(10 * time.Second)),
			header:   sigHeader(stripeGoHeader(sigSecret, sigNow.Add(-11*time.Second), sigBody)),
			wantErr:  providers.ErrTooOld,
		},
		{
			name:     "custom future skew",
			reason:   "WithFutureSkew(0) refuses any t ahead of the receiver's clock",
			verifier: stripe.NewVerifier(stripe.WithFutureSkew(0)),
			header:   sigHeader(stripeGoHeader(sigSecret, sigNow.Add(time.Second), sigBody)),
			wantErr:  providers.ErrTooNew,
		},
		{
			name:   "second v1 matches",
			reason: "while Stripe rolls a secret it sends one v1 per secret; any may match",
			header: sigHeader("t=" + ts + ",v1=" + sigV1(sigOtherSecret, sigNow, sigBody) + ",v1=" + good),
			want:   wantEvent,
		},
		{
			name:   "first v1 matches",
			reason: "the order of the v1 values does not matter",
			header: sigHeader("t=" + ts + ",v1=" + good + ",v1=" + sigV1(sigOtherSecret, sigNow, sigBody)),
			want:   wantEvent,
		},
		{
			name:    "rotation: signed with the new secret",
			reason:  "during a rotation overlap both secrets are configured and the new one signs",
			header:  sigHeader(stripeGoHeader(sigOtherSecret, sigNow, sigBody)),
			secrets: []string{sigSecret, sigOtherSecret},
			want:    wantEvent,
		},
		{
			name:    "rotation: signed with the old secret",
			reason:  "a retry of an event signed before the rotation still verifies during the overlap",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, sigBody)),
			secrets: []string{sigOtherSecret, sigSecret},
			want:    wantEvent,
		},
		{
			name:   "v0 ignored next to a valid v1",
			reason: "v0 is Stripe's legacy test-mode scheme; it must not disturb v1",
			header: sigHeader("t=" + ts + ",v1=" + good + ",v0=" + strings.Repeat("0", 64)),
			want:   wantEvent,
		},
		{
			name:    "only v0",
			reason:  "a v0 value is never checked, even when it is the correct HMAC",
			header:  sigHeader("t=" + ts + ",v0=" + good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:   "unknown scheme ignored",
			reason: "a future scheme must not break verification of v1",
			header: sigHeader("t=" + ts + ",v9=whatever,v1=" + good),
			want:   wantEvent,
		},
		{
			name:    "whitespace after comma",
			reason:  "stripe-go does not trim; ' v1' is not v1, so nothing is left to check",
			header:  sigHeader("t=" + ts + ", v1=" + good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "whitespace before t",
			reason:  "' t' is not t",
			header:  sigHeader(" t=" + ts + ",v1=" + good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "missing header",
			reason:  "an unsigned request is refused",
			header:  http.Header{},
			wantErr: providers.ErrNoSignature,
		},
		{
			name:    "empty header",
			reason:  "an empty value is the same as none",
			header:  sigHeader(""),
			wantErr: providers.ErrNoSignature,
		},
		{
			name:    "two header lines",
			reason:  "which one Stripe meant is ambiguous, so neither is trusted",
			header:  sigHeader("t="+ts+",v1="+good, "t="+ts+",v1="+good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "missing t",
			reason:  "without t there is no signed message (stripe-go reports ErrTooOld)",
			header:  sigHeader("v1=" + good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "t twice",
			reason:  "stripe-go takes the last t; we refuse the ambiguity",
			header:  sigHeader("t=1,t=" + ts + ",v1=" + good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "t with a plus sign",
			reason:  "only canonical decimal is accepted, so the signed text is exactly the header's",
			header:  sigHeader("t=+" + ts + ",v1=" + good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "t not a number",
			reason:  "t must be unix seconds",
			header:  sigHeader("t=yesterday,v1=" + good),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "element without =",
			reason:  "every element is key=value, as stripe-go requires",
			header:  sigHeader("t=" + ts + ",v1=" + good + ",garbage"),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "element with two =",
			reason:  "stripe-go refuses a value containing '='",
			header:  sigHeader("t=" + ts + ",v1=" + good + "="),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "v1 not hex",
			reason:  "a v1 that is not 64 hex digits can never match",
			header:  sigHeader("t=" + ts + ",v1=zz" + good[2:]),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "v1 truncated",
			reason:  "a prefix of the right signature is not the signature",
			header:  sigHeader("t=" + ts + ",v1=" + good[:32]),
			wantErr: providers.ErrMalformed,
		},
		{
			name:   "v1 in upper case",
			reason: "stripe-go decodes the hex, so the case of the digits does not matter",
			header: sigHeader("t=" + ts + ",v1=" + strings.ToUpper(good)),
			want:   wantEvent,
		},
		{
			name:    "no secrets",
			reason:  "with nothing to check against, nothing matches",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, sigBody)),
			secrets: []string{},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "empty secret",
			reason:  "an empty key is not a secret: a delivery signed with it must not verify",
			header:  sigHeader(stripeGoHeader("", sigNow, sigBody)),
			secrets: []string{""},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "authentic, no id",
			reason:  "without an id the delivery cannot be deduplicated",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"type":"invoice.paid"}`))),
			body:    []byte(`{"type":"invoice.paid"}`),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "authentic, empty id",
			reason:  "an empty id would collide with every other empty id",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"id":""}`))),
			body:    []byte(`{"id":""}`),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "authentic, numeric id",
			reason:  "Stripe ids are strings",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"id":42}`))),
			body:    []byte(`{"id":42}`),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "authentic, upper-case ID key",
			reason:  "keys are matched exactly, not case-insensitively like encoding/json structs",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"ID":"evt_1"}`))),
			body:    []byte(`{"ID":"evt_1"}`),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "authentic, not JSON",
			reason:  "a body that is not a JSON object has no id",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`evt_1`))),
			body:    []byte(`evt_1`),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "authentic, id only in a nested object",
			reason:  "only the event's own top-level id is the dedupe key",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"data":{"object":{"id":"pi_1"}}}`))),
			body:    []byte(`{"data":{"object":{"id":"pi_1"}}}`),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "authentic, top-level array",
			reason:  "a body that is not a JSON object has no id",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`[{"id":"evt_1"}]`))),
			body:    []byte(`[{"id":"evt_1"}]`),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:   "authentic, escaped keys",
			reason: "keys match after unescaping, as encoding/json decodes them",
			header: sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"\u0069d":"evt_\u0032","typ\u0065":"a"}`))),
			body:   []byte(`{"\u0069d":"evt_\u0032","typ\u0065":"a"}`),
			want:   providers.Verified{EventID: "evt_2", EventType: "a"},
		},
		{
			name:    "authentic, id twice (once escaped)",
			reason:  "issue 5: which id to dedupe on would be a guess (encoding/json takes the last, others the first)",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"id":"evt_1","\u0069d":"evt_\u0032","type":"a"}`))),
			body:    []byte(`{"id":"evt_1","\u0069d":"evt_\u0032","type":"a"}`),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "authentic, id in two cases",
			reason:  "encoding/json matches a struct's id field to \"ID\" too, so the body names the id twice",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"id":"evt_1","ID":"evt_2","type":"a"}`))),
			body:    []byte(`{"id":"evt_1","ID":"evt_2","type":"a"}`),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "authentic, type twice",
			reason:  "the type goes into ce-type; a sink reading the other would route the event elsewhere",
			header:  sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"id":"evt_1","type":"a","type":"b"}`))),
			body:    []byte(`{"id":"evt_1","type":"a","type":"b"}`),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:   "authentic, repeated keys in nested objects",
			reason: "only the top-level id and type are read; data.object is the provider's business",
			header: sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"id":"evt_1","type":"a","data":{"object":{"id":"x","id":"y"}}}`))),
			body:   []byte(`{"id":"evt_1","type":"a","data":{"object":{"id":"x","id":"y"}}}`),
			want:   providers.Verified{EventID: "evt_1", EventType: "a"},
		},
		{
			name:   "authentic, id without evt_ prefix",
			reason: "the prefix is Stripe's convention, not something the dedupe key needs",
			header: sigHeader(stripeGoHeader(sigSecret, sigNow, []byte(`{"id":"ev_other"}`))),
			body:   []byte(`{"id":"ev_other"}`),
			want:   providers.Verified{EventID: "ev_other"},
		},
		{
			name:    "unsigned body without id",
			reason:  "the body is only read after the signature is checked",
			header:  sigHeader("t=" + ts + ",v1=" + good),
			body:    []byte(`{}`),
			wantErr: providers.ErrBadSignature,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.verifier
			if v == nil {
				v = stripe.NewVerifier()
			}
			body := tc.body
			if body == nil {
				body = sigBody
			}
			secrets := providerstest.Secrets(sigSecret)
			if tc.secrets != nil {
				secrets = providerstest.Secrets(tc.secrets...)
			}

			got, err := v.Verify(providers.Delivery{Header: tc.header, Body: body, Now: sigNow}, secrets)

			providerstest.CheckVerify(t, tc.reason, got, err, tc.want, tc.wantErr)
			if err != nil {
				providerstest.CheckRefusal(t, err, secrets, tc.header.Values(stripe.SignatureHeader)...)
			}
		})
	}
}

func TestSignHeaderMatchesStripeGo(t *testing.T) {
	for _, ts := range []time.Time{sigNow, time.Unix(0, 0), sigNow.Add(1500 * time.Millisecond)} {
		want := stripeGoHeader(sigSecret, ts, sigBody)
		if got := stripe.SignHeader(sigSecret, ts, sigBody); got != want {
			t.Errorf("SignHeader(t=%d) = %q, want stripe-go's %q", ts.Unix(), got, want)
		}
	}
}

func TestVerifyZeroNowUsesWallClock(t *testing.T) {
	// Delivery.Now is injected in tests; a receiver that leaves it zero must not refuse every
	// delivery as "too new".
	h := sigHeader(stripe.SignHeader(sigSecret, time.Now(), sigBody))
	if _, err := stripe.NewVerifier().Verify(providers.Delivery{Header: h, Body: sigBody}, [][]byte{[]byte(sigSecret)}); err != nil {
		t.Fatalf("Verify() with zero Now = %v, want nil", err)
	}
}

// TestAgreesWithStripeGo runs the same headers through stripe-go's ValidatePayload and through
// Verify on the real clock; they agree except where this package deliberately differs.
func TestAgreesWithStripeGo(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	sig := func(d time.Duration) string { return sigV1(sigSecret, now.Add(d), sigBody) }

	cases := []struct {
		name         string
		reason       string
		header       string
		wantStripeGo bool
		wantOurs     bool
	}{
		{"valid", "both accept a fresh signature", "t=" + at(0) + ",v1=" + sig(0), true, true},
		{"old", "both refuse t older than 300 s", "t=" + at(-400*time.Second) + ",v1=" + sig(-400*time.Second), false, false},
		{"future", "stripe-go accepts any future t; we bound it", "t=" + at(24*time.Hour) + ",v1=" + sig(24*time.Hour), true, false},
		{"whitespace", "neither trims", "t=" + at(0) + ", v1=" + sig(0), false, false},
		{"second v1", "both accept any matching v1", "t=" + at(0) + ",v1=" + strings.Repeat("ab", 32) + ",v1=" + sig(0), true, true},
		{"v0 only", "neither checks v0", "t=" + at(0) + ",v0=" + sig(0), false, false},
		{"bad hex then good", "both skip an undecodable v1", "t=" + at(0) + ",v1=xyz,v1=" + sig(0), true, true},
		{"missing t", "both refuse", "v1=" + sig(0), false, false},
		{"trailing comma", "both refuse an empty element", "t=" + at(0) + ",v1=" + sig(0) + ",", false, false},
		{"t twice, last signed", "stripe-go takes the last t; we refuse the ambiguity", "t=1,t=" + at(0) + ",v1=" + sig(0), true, false},
		{"t with plus sign", "stripe-go parses +t as t; we require canonical decimal", "t=+" + at(0) + ",v1=" + sig(0), true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stripeGo := webhook.ValidatePayloadWithTolerance(sigBody, tc.header, sigSecret, webhook.DefaultTolerance) == nil
			_, err := stripe.NewVerifier().Verify(providers.Delivery{Header: sigHeader(tc.header), Body: sigBody, Now: now}, [][]byte{[]byte(sigSecret)})
			ours := err == nil
			if stripeGo != tc.wantStripeGo || ours != tc.wantOurs {
				t.Errorf("%s\naccepted: stripe-go %v (want %v), ours %v (want %v); our error: %v",
					tc.reason, stripeGo, tc.wantStripeGo, ours, tc.wantOurs, err)
			}
		})
	}
}
