package standardwebhooks_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/standardwebhooks"
)

// The published example from the spec's reference libraries.
const (
	vecSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTimestamp = 1614265330
	vecBody      = `{"test": 2432232314}`
	vecSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// otherSecret is a second, unrelated key for wrong-secret and rotation cases.
var otherSecret = standardwebhooks.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("hookwarden-rotated-key-0123456789"))

var vecNow = time.Unix(vecTimestamp, 0)

func mustKey(t testing.TB, secret string) []byte {
	t.Helper()
	key, err := standardwebhooks.DecodeSecret([]byte(secret))
	if err != nil {
		t.Fatalf("DecodeSecret: %v", err)
	}
	return key
}

func TestSignPublishedVector(t *testing.T) {
	if got := standardwebhooks.Sign(mustKey(t, vecSecret), vecID, vecNow, []byte(vecBody)); got != vecSignature {
		t.Errorf("Sign(spec example) = %q, want %q", got, vecSignature)
	}
}

func TestDecodeSecret(t *testing.T) {
	raw := []byte("0123456789abcdefghijklmnop")
	padded := base64.StdEncoding.EncodeToString(raw[:25]) // 25 bytes need padding
	cases := []struct {
		name    string
		reason  string
		secret  string
		want    []byte
		wantErr bool
	}{
		{"prefixed", "the spec's format", "whsec_" + base64.StdEncoding.EncodeToString(raw), raw, false},
		{"bare", "a secret without the prefix is taken as base64", base64.StdEncoding.EncodeToString(raw), raw, false},
		{"padded", "padding is accepted", "whsec_" + padded, raw[:25], false},
		{"unpadded", "padding is optional", "whsec_" + strings.TrimRight(padded, "="), raw[:25], false},
		{"not base64", "a Stripe-style secret is not a Standard Webhooks secret", "whsec_not*base64!", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := standardwebhooks.DecodeSecret([]byte(tc.secret))
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nDecodeSecret() error = %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), tc.secret) {
				t.Errorf("error %q contains the secret", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecodeSecret() mismatch (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

var headers = providerstest.Headers

func TestVerify(t *testing.T) {
	ts := strconv.Itoa(vecTimestamp)
	at := func(d time.Duration) string { return strconv.FormatInt(vecNow.Add(d).Unix(), 10) }
	signAt := func(secret string, d time.Duration) string {
		return standardwebhooks.Sign(mustKey(t, secret), vecID, vecNow.Add(d), []byte(vecBody))
	}
	other := signAt(otherSecret, 0)
	want := providers.Verified{EventID: vecID}

	cases := []struct {
		name     string
		reason   string
		verifier *standardwebhooks.Verifier
		header   http.Header
		body     string
		secrets  []string
		want     providers.Verified
		wantErr  error
	}{
		{
			name:   "published vector",
			reason: "the spec's example must verify with Now = its timestamp",
			header: headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			want:   want,
		},
		{
			name:    "secret without prefix",
			reason:  "a bare base64 secret is the same key",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			secrets: []string{strings.TrimPrefix(vecSecret, "whsec_")},
			want:    want,
		},
		{
			name:   "event type from the body",
			reason: "the spec's payload carries its type at the top level",
			header: headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature,
				standardwebhooks.Sign(mustKey(t, vecSecret), vecID, vecNow, []byte(`{"type":"invoice.paid","data":{}}`))),
			body: `{"type":"invoice.paid","data":{}}`,
			want: providers.Verified{EventID: vecID, EventType: "invoice.paid"},
		},
		{
			name:   "event type twice",
			reason: "issue 5: the type goes into ce-type, and a sink might read the other one",
			header: headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature,
				standardwebhooks.Sign(mustKey(t, vecSecret), vecID, vecNow, []byte(`{"type":"invoice.paid","Type":"invoice.void"}`))),
			body:    `{"type":"invoice.paid","Type":"invoice.void"}`,
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "webhook-id twice",
			reason:  "only the first is signed; a reader that takes the other would dedupe on an unsigned id",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderID, "msg_other", standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "Stripe-style raw key",
			reason:  "keying the HMAC with the literal whsec_ string (Stripe's way) does not match",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, standardwebhooks.Sign([]byte(vecSecret), vecID, vecNow, []byte(vecBody))),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "tampered body",
			reason:  "one changed byte must break the signature",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			body:    `{"test": 2432232315}`,
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "tampered id",
			reason:  "the id is signed, so a replay under a fresh id fails",
			header:  headers(standardwebhooks.HeaderID, vecID+"x", standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "tampered timestamp",
			reason:  "the timestamp is signed, so a replay cannot refresh it",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, at(time.Second), standardwebhooks.HeaderSignature, vecSignature),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "wrong secret",
			reason:  "a delivery signed for another endpoint must be refused",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, other),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "rotation: two secrets, new one signs",
			reason:  "during a rotation overlap both secrets are configured",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, other),
			secrets: []string{vecSecret, otherSecret},
			want:    want,
		},
		{
			name:   "rotation: two signatures, second matches",
			reason: "the sender lists one signature per secret; any may match",
			header: headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, other+" "+vecSignature),
			want:   want,
		},
		{
			name:   "v1a ignored next to v1",
			reason: "asymmetric signatures are not checked and must not disturb v1",
			header: headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, "v1a,"+strings.TrimPrefix(vecSignature, "v1,")+" "+vecSignature),
			want:   want,
		},
		{
			name:    "only v1a",
			reason:  "a v1a entry is never checked, even if its text equals the v1 HMAC",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, "v1a,"+strings.TrimPrefix(vecSignature, "v1,")),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "comma-separated list",
			reason:  "entries are separated by spaces; a comma list is one v1 entry with a bogus value",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, other+","+vecSignature),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "unpadded signature",
			reason:  "signatures are compared as canonical base64 text",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, strings.TrimRight(vecSignature, "=")),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:   "4m59s old",
			reason: "inside the ±5 min window",
			header: headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, at(-299*time.Second), standardwebhooks.HeaderSignature, signAt(vecSecret, -299*time.Second)),
			want:   want,
		},
		{
			name:    "5m01s old",
			reason:  "outside the window: a replay or a stale retry",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, at(-301*time.Second), standardwebhooks.HeaderSignature, signAt(vecSecret, -301*time.Second)),
			wantErr: providers.ErrTooOld,
		},
		{
			name:   "4m59s ahead",
			reason: "inside the ±5 min window",
			header: headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, at(299*time.Second), standardwebhooks.HeaderSignature, signAt(vecSecret, 299*time.Second)),
			want:   want,
		},
		{
			name:    "5m01s ahead",
			reason:  "the window is bounded in the future too",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, at(301*time.Second), standardwebhooks.HeaderSignature, signAt(vecSecret, 301*time.Second)),
			wantErr: providers.ErrTooNew,
		},
		{
			name:     "custom tolerance",
			reason:   "WithTolerance narrows the window",
			verifier: standardwebhooks.NewVerifier(standardwebhooks.WithTolerance(time.Minute)),
			header:   headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, at(-61*time.Second), standardwebhooks.HeaderSignature, signAt(vecSecret, -61*time.Second)),
			wantErr:  providers.ErrTooOld,
		},
		{
			name:    "forged and old",
			reason:  "the signature is checked first, so a forgery is never reported as a clock problem",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, at(-time.Hour), standardwebhooks.HeaderSignature, signAt(otherSecret, -time.Hour)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "no signature",
			reason:  "an unsigned request is refused",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts),
			wantErr: providers.ErrNoSignature,
		},
		{
			name:    "no id",
			reason:  "webhook-id is the dedupe key and part of the signed content",
			header:  headers(standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "no timestamp",
			reason:  "the timestamp is part of the signed content",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderSignature, vecSignature),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "timestamp with a plus sign",
			reason:  "the timestamp must be canonical unix seconds",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, "+"+ts, standardwebhooks.HeaderSignature, vecSignature),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "timestamp not a number",
			reason:  "the timestamp must be unix seconds",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, "2021-02-26T15:02:10Z", standardwebhooks.HeaderSignature, vecSignature),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "signature without version",
			reason:  "an entry without 'v1,' is not a v1 signature",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, strings.TrimPrefix(vecSignature, "v1,")),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "secret not base64",
			reason:  "an undecodable secret cannot sign anything",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			secrets: []string{"whsec_***"},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "undecodable secret next to a good one",
			reason:  "one broken secret in the overlap must not block the other",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			secrets: []string{"whsec_***", vecSecret},
			want:    want,
		},
		{
			name:    "empty secret",
			reason:  "an empty key is not a secret: a delivery signed with it must not verify",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, standardwebhooks.Sign(nil, vecID, vecNow, []byte(vecBody))),
			secrets: []string{"whsec_"},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "no secrets",
			reason:  "with nothing to check against, nothing matches",
			header:  headers(standardwebhooks.HeaderID, vecID, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, vecSignature),
			secrets: []string{},
			wantErr: providers.ErrBadSignature,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.verifier
			if v == nil {
				v = standardwebhooks.NewVerifier()
			}
			body := tc.body
			if body == "" {
				body = vecBody
			}
			secrets := providerstest.Secrets(vecSecret)
			if tc.secrets != nil {
				secrets = providerstest.Secrets(tc.secrets...)
			}

			got, err := v.Verify(providers.Delivery{Header: tc.header, Body: []byte(body), Now: vecNow}, secrets)

			providerstest.CheckVerify(t, tc.reason, got, err, tc.want, tc.wantErr)
			if err != nil {
				providerstest.CheckRefusal(t, err, secrets, tc.header.Values(standardwebhooks.HeaderSignature)...)
			}
		})
	}
}
