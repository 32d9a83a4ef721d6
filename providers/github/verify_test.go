package github_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/providerstest"
)

// The published example from GitHub's "Validating webhook deliveries".
const (
	docSecret    = "It's a Secret to Everybody"
	docPayload   = "Hello, World!"
	docSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

const (
	secret      = "hookwarden-leak-canary-github-secret"
	otherSecret = "hookwarden-rotated-github-secret"
	guid        = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
)

var body = []byte(`{"zen":"Design for failure.","hook_id":12345}`)

func TestSignPublishedVector(t *testing.T) {
	if got := github.Sign([]byte(docSecret), []byte(docPayload)); got != docSignature {
		t.Errorf("Sign(docs example) = %q, want %q", got, docSignature)
	}
}

var headers = providerstest.Headers

func TestVerify(t *testing.T) {
	good := github.Sign([]byte(secret), body)
	legacy := "sha1=0123456789abcdef0123456789abcdef01234567"

	cases := []struct {
		name     string
		reason   string
		verifier *github.Verifier
		header   http.Header
		body     []byte
		secrets  []string
		want     providers.Verified
		wantErr  error
	}{
		{
			name:    "published vector",
			reason:  "GitHub's documented example (a ping) must verify, marked as a ping",
			header:  headers(github.SignatureHeader, docSignature, github.DeliveryHeader, guid, github.EventHeader, "ping"),
			body:    []byte(docPayload),
			secrets: []string{docSecret},
			want:    providers.Verified{EventID: guid, EventType: "ping", Ping: true},
		},
		{
			name:   "signed",
			reason: "a delivery signed by Sign verifies and is keyed on the delivery GUID",
			header: headers(github.SignatureHeader, good, github.DeliveryHeader, guid, github.EventHeader, "push"),
			want:   providers.Verified{EventID: guid, EventType: "push"},
		},
		{
			name:   "no event header",
			reason: "the event type is informational and may be empty",
			header: headers(github.SignatureHeader, good, github.DeliveryHeader, guid),
			want:   providers.Verified{EventID: guid},
		},
		{
			name:    "tampered body",
			reason:  "one changed byte must break the signature",
			header:  headers(github.SignatureHeader, good, github.DeliveryHeader, guid),
			body:    []byte(strings.Replace(string(body), "failure", "failures", 1)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "wrong secret",
			reason:  "a delivery signed for another hook must be refused",
			header:  headers(github.SignatureHeader, github.Sign([]byte(otherSecret), body), github.DeliveryHeader, guid),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "rotation: new secret",
			reason:  "during a rotation overlap both secrets are configured",
			header:  headers(github.SignatureHeader, github.Sign([]byte(otherSecret), body), github.DeliveryHeader, guid),
			secrets: []string{secret, otherSecret},
			want:    providers.Verified{EventID: guid},
		},
		{
			name:    "rotation: old secret",
			reason:  "a redelivery signed with the old secret still verifies during the overlap",
			header:  headers(github.SignatureHeader, good, github.DeliveryHeader, guid),
			secrets: []string{otherSecret, secret},
			want:    providers.Verified{EventID: guid},
		},
		{
			name:    "only the SHA-1 header",
			reason:  "X-Hub-Signature is SHA-1 and never accepted (go-github would fall back to it)",
			header:  headers("X-Hub-Signature", legacy, github.DeliveryHeader, guid),
			wantErr: providers.ErrNoSignature,
		},
		{
			name:   "both headers",
			reason: "GitHub sends both; the SHA-1 one is ignored",
			header: headers("X-Hub-Signature", legacy, github.SignatureHeader, good, github.DeliveryHeader, guid),
			want:   providers.Verified{EventID: guid},
		},
		{
			name:    "no signature",
			reason:  "a hook without a secret sends no signature; it is refused",
			header:  headers(github.DeliveryHeader, guid),
			wantErr: providers.ErrNoSignature,
		},
		{
			name:    "empty signature",
			reason:  "an empty value is the same as none",
			header:  http.Header{"X-Hub-Signature-256": {""}, "X-Github-Delivery": {guid}},
			wantErr: providers.ErrNoSignature,
		},
		{
			name:    "two signature headers",
			reason:  "which one GitHub meant is ambiguous",
			header:  headers(github.SignatureHeader, good, github.SignatureHeader, good, github.DeliveryHeader, guid),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "no prefix",
			reason:  "the docs say the value always starts with sha256=",
			header:  headers(github.SignatureHeader, strings.TrimPrefix(good, "sha256="), github.DeliveryHeader, guid),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "sha1 prefix in the 256 header",
			reason:  "only sha256= is a valid algorithm",
			header:  headers(github.SignatureHeader, "sha1="+strings.TrimPrefix(good, "sha256="), github.DeliveryHeader, guid),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "upper-case prefix",
			reason:  "the prefix is matched exactly",
			header:  headers(github.SignatureHeader, "SHA256="+strings.TrimPrefix(good, "sha256="), github.DeliveryHeader, guid),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "not hex",
			reason:  "the value must be hex",
			header:  headers(github.SignatureHeader, "sha256=zz"+good[9:], github.DeliveryHeader, guid),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "truncated",
			reason:  "a prefix of the right signature is not the signature",
			header:  headers(github.SignatureHeader, good[:40], github.DeliveryHeader, guid),
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "trailing space",
			reason:  "values are not trimmed",
			header:  headers(github.SignatureHeader, good+" ", github.DeliveryHeader, guid),
			wantErr: providers.ErrMalformed,
		},
		{
			name:   "upper-case hex",
			reason: "the hex is decoded, so the case of the digits does not matter",
			header: headers(github.SignatureHeader, "sha256="+strings.ToUpper(good[7:]), github.DeliveryHeader, guid),
			want:   providers.Verified{EventID: guid},
		},
		{
			name:    "authentic, no delivery GUID",
			reason:  "without X-GitHub-Delivery the delivery cannot be deduplicated",
			header:  headers(github.SignatureHeader, good),
			wantErr: providers.ErrNoEventID,
		},
		{
			name:    "forged, no delivery GUID",
			reason:  "the signature is checked before the GUID",
			header:  headers(github.SignatureHeader, github.Sign([]byte(otherSecret), body)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "no secrets",
			reason:  "with nothing to check against, nothing matches",
			header:  headers(github.SignatureHeader, good, github.DeliveryHeader, guid),
			secrets: []string{},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "empty secret",
			reason:  "an empty key is not a secret: a delivery signed with it must not verify",
			header:  headers(github.SignatureHeader, github.Sign(nil, body), github.DeliveryHeader, guid),
			secrets: []string{""},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:     "per hook",
			reason:   "WithPerHookEventID keys each hook's delivery separately",
			verifier: github.NewVerifier(github.WithPerHookEventID()),
			header:   headers(github.SignatureHeader, good, github.DeliveryHeader, guid, github.HookIDHeader, "12345", github.EventHeader, "push"),
			want:     providers.Verified{EventID: "12345/" + guid, EventType: "push"},
		},
		{
			name:    "delivery GUID twice",
			reason:  "issue 5: two X-GitHub-Delivery values leave the dedupe key a guess",
			header:  headers(github.SignatureHeader, good, github.DeliveryHeader, guid, github.DeliveryHeader, "another-guid", github.EventHeader, "push"),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "event type twice",
			reason:  "two X-GitHub-Event values leave the type (ce-type, ping or not) a guess",
			header:  headers(github.SignatureHeader, good, github.DeliveryHeader, guid, github.EventHeader, "push", github.EventHeader, "ping"),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:     "per hook, hook id twice",
			reason:   "the per-hook key takes X-GitHub-Hook-ID, which must then be unambiguous too",
			verifier: github.NewVerifier(github.WithPerHookEventID()),
			header:   headers(github.SignatureHeader, good, github.DeliveryHeader, guid, github.HookIDHeader, "1", github.HookIDHeader, "2"),
			wantErr:  providers.ErrAmbiguous,
		},
		{
			name:     "per hook, no hook id",
			reason:   "a per-hook key needs X-GitHub-Hook-ID",
			verifier: github.NewVerifier(github.WithPerHookEventID()),
			header:   headers(github.SignatureHeader, good, github.DeliveryHeader, guid),
			wantErr:  providers.ErrNoEventID,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.verifier
			if v == nil {
				v = github.NewVerifier()
			}
			b := tc.body
			if b == nil {
				b = body
			}
			secrets := providerstest.Secrets(secret)
			if tc.secrets != nil {
				secrets = providerstest.Secrets(tc.secrets...)
			}

			got, err := v.Verify(providers.Delivery{Header: tc.header, Body: b, Now: time.Unix(1_700_000_000, 0)}, secrets)

			want := tc.want
			if tc.wantErr == nil {
				// Issue 4: the GUID is unsigned, so every verified delivery carries its body's
				// digest, which the receiver dedupes on too.
				sum := sha256.Sum256(b)
				want.ReplayKey = hex.EncodeToString(sum[:])
			}
			providerstest.CheckVerify(t, tc.reason, got, err, want, tc.wantErr)
			if err != nil {
				providerstest.CheckRefusal(t, err, secrets, tc.header.Values(github.SignatureHeader)...)
			}
		})
	}
}

// Issue 4: only the body is signed, so the replay key depends on the body alone: a capture
// resent under a fresh GUID, event name or hook id keeps it, any other body changes it.
func TestReplayKeyIsTheSignedBody(t *testing.T) {
	key := func(v *github.Verifier, b []byte, kv ...string) string {
		t.Helper()
		got, err := v.Verify(providers.Delivery{Header: headers(append([]string{github.SignatureHeader, github.Sign([]byte(secret), b)}, kv...)...), Body: b},
			providerstest.Secrets(secret))
		if err != nil {
			t.Fatal(err)
		}
		return got.ReplayKey
	}
	v, perHook := github.NewVerifier(), github.NewVerifier(github.WithPerHookEventID())
	original := key(v, body, github.DeliveryHeader, guid, github.EventHeader, "push")
	for _, c := range []struct {
		reason string
		got    string
	}{
		{"a fresh GUID", key(v, body, github.DeliveryHeader, "another-guid", github.EventHeader, "push")},
		{"another event name", key(v, body, github.DeliveryHeader, "another-guid", github.EventHeader, "issues")},
		{"per hook, another hook id", key(perHook, body, github.DeliveryHeader, "another-guid", github.HookIDHeader, "999")},
	} {
		if c.got != original {
			t.Errorf("%s: replay key %q, want the original's %q", c.reason, c.got, original)
		}
	}
	if other := key(v, append(body, ' '), github.DeliveryHeader, guid); other == original || other == "" {
		t.Errorf("another body: replay key %q, want one of its own (original %q)", other, original)
	}
}
