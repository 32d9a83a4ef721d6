package rest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/standardwebhooks"
)

func macHex(key, msg string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// digest is a replay key computed here, independently of providers.Digest.
func digest(signed string) string {
	sum := sha256.Sum256([]byte(signed))
	return hex.EncodeToString(sum[:])
}

func TestHMACSchemes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	old := strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)
	calendly := rest.Config{Header: "Calendly-Webhook-Signature", Separator: ",", ElementPrefix: "v1=", TimestampElement: "t=", Content: "{timestamp}.{body}", Tolerance: rest.Duration(3 * time.Minute)}
	pagerduty := rest.Config{Header: "X-PagerDuty-Signature", Separator: ",", ElementPrefix: "v1=", EventIDHeader: "X-Webhook-Id"}
	swKey := []byte("0123456789abcdef0123456789abcdef")
	swSecret := "whsec_" + base64.StdEncoding.EncodeToString(swKey)
	swLike := rest.Config{Header: "webhook-signature", Separator: " ", ElementPrefix: "v1,", Encoding: rest.Base64, KeyEncoding: rest.KeyBase64, Content: "{id}.{timestamp}.{body}", IDHeader: "webhook-id", TimestampHeader: "webhook-timestamp", EventIDHeader: "webhook-id"}
	timestamped := calendly
	timestamped.EventIDHeader = "X-Event-Id"
	hashID := digest(string(body))

	cases := []struct {
		name, reason string
		cfg          rest.Config
		header       http.Header
		secrets      [][]byte
		want         providers.Verified
		wantErr      error
	}{
		{"calendly", "t= and v1= elements, t.body signed, inside the tolerance", calendly,
			providerstest.Headers("Calendly-Webhook-Signature", "t="+ts+",v1="+macHex(secret, ts+"."+string(body))),
			providerstest.Secrets(secret), providers.Verified{EventID: hashID, IDFallback: true}, nil},
		{"calendly too old", "authentic but outside the tolerance", calendly,
			providerstest.Headers("Calendly-Webhook-Signature", "t="+old+",v1="+macHex(secret, old+"."+string(body))),
			providerstest.Secrets(secret), providers.Verified{}, providers.ErrTooOld},
		{"calendly timestamp swapped", "the timestamp is signed", calendly,
			providerstest.Headers("Calendly-Webhook-Signature", "t="+ts+",v1="+macHex(secret, old+"."+string(body))),
			providerstest.Secrets(secret), providers.Verified{}, providers.ErrBadSignature},
		{"calendly without t", "the signed timestamp is required", calendly,
			providerstest.Headers("Calendly-Webhook-Signature", "v1="+macHex(secret, ts+"."+string(body))),
			providerstest.Secrets(secret), providers.Verified{}, providers.ErrMalformed},
		{"pagerduty second signature", "any of several signatures in one header", pagerduty,
			providerstest.Headers("X-PagerDuty-Signature", "v1="+macHex(otherSecret, string(body))+",v1="+macHex(secret, string(body)), "X-Webhook-Id", "wh-9"),
			providerstest.Secrets(secret), providers.Verified{EventID: "wh-9", ReplayKey: hashID}, nil},
		{"pagerduty unknown version", "elements of another version are ignored", pagerduty,
			providerstest.Headers("X-PagerDuty-Signature", "v0=abc,v1="+macHex(secret, string(body)), "X-Webhook-Id", "wh-9"),
			providerstest.Secrets(secret), providers.Verified{EventID: "wh-9", ReplayKey: hashID}, nil},
		{"unsigned id header, signed timestamp", "issue 4: the replay key is the digest of all that is signed, timestamp included", timestamped,
			providerstest.Headers("Calendly-Webhook-Signature", "t="+ts+",v1="+macHex(secret, ts+"."+string(body)), "X-Event-Id", "ev-7"),
			providerstest.Secrets(secret), providers.Verified{EventID: "ev-7", ReplayKey: digest(ts + "." + string(body))}, nil},
		{"pagerduty no v1", "no element of the scheme", pagerduty,
			providerstest.Headers("X-PagerDuty-Signature", "v0="+macHex(secret, string(body))),
			providerstest.Secrets(secret), providers.Verified{}, providers.ErrMalformed},
		{"standard webhooks as hmac", "id.timestamp.body with a whsec_ key agrees with the Standard Webhooks signer", swLike,
			providerstest.Headers("webhook-signature", "v1,bad v1a,xyz "+standardwebhooks.Sign(swKey, "msg_1", now, body), "webhook-id", "msg_1", "webhook-timestamp", ts),
			providerstest.Secrets(swSecret), providers.Verified{EventID: "msg_1"}, nil},
		{"standard webhooks as hmac without id", "the signed id is required", swLike,
			providerstest.Headers("webhook-signature", standardwebhooks.Sign(swKey, "msg_1", now, body), "webhook-timestamp", ts),
			providerstest.Secrets(swSecret), providers.Verified{}, providers.ErrNoEventID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := mustVerifier(t, tc.cfg)
			got, err := v.Verify(providers.Delivery{Header: tc.header, Body: body, Now: now}, tc.secrets)
			providerstest.CheckVerify(t, tc.reason, got, err, tc.want, tc.wantErr)
			if err != nil {
				providerstest.CheckRefusal(t, err, tc.secrets, tc.header.Get(tc.cfg.Header))
			}
		})
	}
}

func TestHMACSignAtRoundTrips(t *testing.T) {
	zendesk := mustVerifier(t, rest.Config{Header: "X-Zendesk-Webhook-Signature", Encoding: rest.Base64, Content: "{timestamp}{body}", TimestampHeader: "X-Zendesk-Webhook-Signature-Timestamp", TimestampFormat: rest.TimestampRFC3339})
	h := providerstest.Headers("X-Zendesk-Webhook-Signature", zendesk.SignAt([]byte(secret), "", "2021-03-25T05:09:27Z", body), "X-Zendesk-Webhook-Signature-Timestamp", "2021-03-25T05:09:27Z")
	if _, err := zendesk.Verify(providers.Delivery{Header: h, Body: body}, providerstest.Secrets(secret)); err != nil {
		t.Errorf("Zendesk-style delivery: %v", err)
	}
	h.Set("X-Zendesk-Webhook-Signature-Timestamp", "1616648967")
	if _, err := zendesk.Verify(providers.Delivery{Header: h, Body: body}, providerstest.Secrets(secret)); !errors.Is(err, providers.ErrMalformed) {
		t.Errorf("unix seconds where RFC 3339 is configured: %v; want ErrMalformed", err)
	}
}

func TestNewVerifierRefusesInconsistentSchemes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  rest.Config
		want string
	}{
		{"element prefix alone", rest.Config{Header: "X-Sig", ElementPrefix: "v1="}, "separator"},
		{"timestamp not signed", rest.Config{Header: "X-Sig", TimestampHeader: "X-Ts"}, "{timestamp}"},
		{"signed timestamp without a source", rest.Config{Header: "X-Sig", Content: "{timestamp}.{body}"}, "{timestamp}"},
		{"unknown placeholder", rest.Config{Header: "X-Sig", Content: "{method}{body}"}, "{method}"},
		{"tolerance without a timestamp", rest.Config{Header: "X-Sig", Tolerance: rest.Duration(time.Minute)}, "tolerance"},
		{"id not signed", rest.Config{Header: "X-Sig", IDHeader: "X-Id"}, "{id}"},
		{"unknown key encoding", rest.Config{Header: "X-Sig", KeyEncoding: "hex"}, "key encoding"},
		{"unknown timestamp format", rest.Config{Header: "X-Sig", Content: "{timestamp}{body}", TimestampHeader: "X-Ts", TimestampFormat: "ms"}, "timestamp format"},
	} {
		if _, err := rest.NewVerifier(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewVerifier = %v; want an error about %s", tc.name, err, tc.want)
		}
	}
}

func TestTokenVerifier(t *testing.T) {
	v, err := rest.NewVerifierFromSpec([]byte(`{"scheme":"token","token":{"header":"X-Gitlab-Token","eventIDHeader":"Idempotency-Key"}}`))
	if err != nil {
		t.Fatal(err)
	}
	secrets := providerstest.Secrets("", otherSecret, secret)
	for _, tc := range []struct {
		name    string
		header  http.Header
		want    providers.Verified
		wantErr error
	}{
		// Nothing is signed and the id header could be swapped: the body is the replay key.
		{"match", providerstest.Headers("X-Gitlab-Token", secret, "Idempotency-Key", "idem-1"), providers.Verified{EventID: "idem-1", ReplayKey: digest(string(body))}, nil},
		{"no id header", providerstest.Headers("X-Gitlab-Token", secret), providers.Verified{EventID: digest(string(body)), IDFallback: true, ReplayKey: digest(string(body))}, nil},
		{"wrong", providerstest.Headers("X-Gitlab-Token", secret+"x"), providers.Verified{}, providers.ErrBadSignature},
		{"empty secret never matches", providerstest.Headers("X-Gitlab-Token", " "), providers.Verified{}, providers.ErrBadSignature},
		{"missing", providerstest.Headers(), providers.Verified{}, providers.ErrNoSignature},
		{"twice", http.Header{"X-Gitlab-Token": {secret, secret}}, providers.Verified{}, providers.ErrMalformed},
		{"id header twice", http.Header{"X-Gitlab-Token": {secret}, "Idempotency-Key": {"idem-1", "idem-2"}}, providers.Verified{}, providers.ErrAmbiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(providers.Delivery{Header: tc.header, Body: body}, secrets)
			providerstest.CheckVerify(t, tc.name, got, err, tc.want, tc.wantErr)
			if err != nil {
				providerstest.CheckRefusal(t, err, secrets, tc.header.Get("X-Gitlab-Token"))
			}
		})
	}
}

func TestVerifierSpecs(t *testing.T) {
	for _, tc := range []struct {
		spec, want string
	}{
		{`{"scheme":"hmac"}`, "needs its own block"},
		{`{"scheme":"hmac","hmac":{"header":"X-S"},"token":{"header":"X-T"}}`, "needs its own block"},
		{`{"scheme":"magic"}`, "unknown scheme"},
		{`{"scheme":"none","extra":1}`, "unknown field"},
		{`{"scheme":"standardWebhooks","standardWebhooks":{"headerPrefix":"sv ix-"}}`, "header prefix"},
	} {
		if _, err := rest.NewVerifierFromSpec([]byte(tc.spec)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewVerifierFromSpec(%s) = %v; want %q", tc.spec, err, tc.want)
		}
	}
	if v, err := rest.NewVerifierFromSpec([]byte(`{"scheme":"none"}`)); v != nil || err != nil {
		t.Errorf("scheme none = %v, %v; want no verifier", v, err)
	}
	// A svix- prefix reads svix-* headers only.
	v, err := rest.NewVerifierFromSpec([]byte(`{"scheme":"standardWebhooks","standardWebhooks":{"headerPrefix":"svix-"}}`))
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	sig := standardwebhooks.Sign(key, "msg_2", now, body)
	ts := strconv.FormatInt(now.Unix(), 10)
	secrets := providerstest.Secrets("whsec_" + base64.StdEncoding.EncodeToString(key))
	if _, err := v.Verify(providers.Delivery{Header: providerstest.Headers("webhook-id", "msg_2", "webhook-timestamp", ts, "webhook-signature", sig), Body: body, Now: now}, secrets); !errors.Is(err, providers.ErrNoSignature) {
		t.Errorf("webhook-* headers under prefix svix-: %v; want ErrNoSignature", err)
	}
	if got, err := v.Verify(providers.Delivery{Header: providerstest.Headers("svix-id", "msg_2", "svix-timestamp", ts, "svix-signature", sig), Body: body, Now: now}, secrets); err != nil || got.EventID != "msg_2" {
		t.Errorf("svix-* headers: %+v, %v", got, err)
	}
}
