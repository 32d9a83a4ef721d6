package rest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest"
)

const (
	secret      = "hookwarden-leak-canary-rest-secret"
	otherSecret = "hookwarden-rotated-rest-secret"
)

var body = []byte(`{"id":"ev_123","data":{"id":42,"obj":{"ref":"r-9"}},"type":"order.created"}`)

func mustVerifier(t testing.TB, cfg rest.Config) *rest.Verifier {
	t.Helper()
	v, err := rest.NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier(%+v): %v", cfg, err)
	}
	return v
}

func TestNewVerifier(t *testing.T) {
	cases := []struct {
		name    string
		reason  string
		cfg     rest.Config
		wantErr bool
	}{
		{"defaults", "only the header is required", rest.Config{Header: "X-Signature"}, false},
		{"everything", "every option set", rest.Config{Header: "X-Sig", Algorithm: rest.SHA512, Encoding: rest.Base64, Prefix: "v1=", EventIDHeader: "X-Event-Id", EventIDField: "data.id"}, false},
		{"sha1", "legacy providers sign with HMAC-SHA1", rest.Config{Header: "X-Sig", Algorithm: rest.SHA1}, false},
		{"no header", "there is nothing to read the signature from", rest.Config{}, true},
		{"header with space", "not a header name", rest.Config{Header: "X Signature"}, true},
		{"header with colon", "not a header name", rest.Config{Header: "X-Signature:"}, true},
		{"unknown algorithm", "md5 is not offered", rest.Config{Header: "X-Sig", Algorithm: "md5"}, true},
		{"algorithm in upper case", "names are matched exactly, like the CRD enum", rest.Config{Header: "X-Sig", Algorithm: "SHA256"}, true},
		{"unknown encoding", "base32 is not offered", rest.Config{Header: "X-Sig", Encoding: "base32"}, true},
		{"bad event id header", "not a header name", rest.Config{Header: "X-Sig", EventIDHeader: "X Event"}, true},
		{"field with empty element", "data..id names nothing", rest.Config{Header: "X-Sig", EventIDField: "data..id"}, true},
		{"field with leading dot", ".id names nothing", rest.Config{Header: "X-Sig", EventIDField: ".id"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rest.NewVerifier(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nNewVerifier() error = %v, want error %v", tc.reason, err, tc.wantErr)
			}
		})
	}
}

// TestSignKnownVectors pins Sign to published HMAC test vectors (RFC 4231 and RFC 2202 test
// case 2, and GitHub's documented example).
func TestSignKnownVectors(t *testing.T) {
	cases := []struct {
		name   string
		cfg    rest.Config
		secret string
		body   string
		want   string
	}{
		{"RFC 4231 HMAC-SHA256", rest.Config{Header: "X-Sig"}, "Jefe", "what do ya want for nothing?",
			"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
		{"RFC 4231 HMAC-SHA512", rest.Config{Header: "X-Sig", Algorithm: rest.SHA512}, "Jefe", "what do ya want for nothing?",
			"164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"},
		{"RFC 2202 HMAC-SHA1", rest.Config{Header: "X-Sig", Algorithm: rest.SHA1}, "Jefe", "what do ya want for nothing?",
			"effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
		{"RFC 4231 HMAC-SHA256 in base64", rest.Config{Header: "X-Sig", Encoding: rest.Base64}, "Jefe", "what do ya want for nothing?",
			"W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM="},
		{"GitHub docs example", rest.Config{Header: "X-Hub-Signature-256", Prefix: "sha256="}, "It's a Secret to Everybody", "Hello, World!",
			"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustVerifier(t, tc.cfg).Sign([]byte(tc.secret), []byte(tc.body)); got != tc.want {
				t.Errorf("Sign() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	hexCfg := rest.Config{Header: "X-Signature", Prefix: "sha256=", EventIDHeader: "X-Event-Id", EventIDField: "id"}
	b64Cfg := rest.Config{Header: "X-Signature", Algorithm: rest.SHA1, Encoding: rest.Base64}
	sha512Cfg := rest.Config{Header: "X-Signature", Algorithm: rest.SHA512, EventIDField: "data.id"}
	sign := func(cfg rest.Config, s string, b []byte) string { return mustVerifier(t, cfg).Sign([]byte(s), b) }
	good := sign(hexCfg, secret, body)
	bodyHash := sha256.Sum256(body)
	fallback := providers.Verified{EventID: hex.EncodeToString(bodyHash[:]), IDFallback: true}
	// hexCfg's id header is unsigned, so its deliveries carry the signed body's digest.
	bodyDigest := hex.EncodeToString(bodyHash[:])

	cases := []struct {
		name    string
		reason  string
		cfg     rest.Config
		header  http.Header
		body    []byte
		secrets []string
		want    providers.Verified
		wantErr error
	}{
		{
			name:   "hex with prefix, id from header",
			reason: "the configured id header wins",
			cfg:    hexCfg,
			header: http.Header{"X-Signature": {good}, "X-Event-Id": {"hdr-1"}},
			want:   providers.Verified{EventID: "hdr-1", ReplayKey: bodyDigest},
		},
		{
			name:   "id header absent, id from field",
			reason: "without the header the body field is used",
			cfg:    hexCfg,
			header: http.Header{"X-Signature": {good}},
			want:   providers.Verified{EventID: "ev_123", ReplayKey: bodyDigest},
		},
		{
			name:   "dotted field, numeric id",
			reason: "a nested numeric id is used as written",
			cfg:    sha512Cfg,
			header: http.Header{"X-Signature": {sign(sha512Cfg, secret, body)}},
			want:   providers.Verified{EventID: "42"},
		},
		{
			name:   "deeper dotted field",
			reason: "paths go through any number of objects",
			cfg:    rest.Config{Header: "X-Signature", EventIDField: "data.obj.ref"},
			header: http.Header{"X-Signature": {sign(rest.Config{Header: "X-Signature"}, secret, body)}},
			want:   providers.Verified{EventID: "r-9"},
		},
		{
			name:   "field missing: body hash",
			reason: "with no id anywhere the key falls back to the body's SHA-256, flagged",
			cfg:    rest.Config{Header: "X-Signature", EventIDField: "data.missing"},
			header: http.Header{"X-Signature": {sign(rest.Config{Header: "X-Signature"}, secret, body)}},
			want:   fallback,
		},
		{
			name:   "field is an object: body hash",
			reason: "only strings and numbers are ids",
			cfg:    rest.Config{Header: "X-Signature", EventIDField: "data"},
			header: http.Header{"X-Signature": {sign(rest.Config{Header: "X-Signature"}, secret, body)}},
			want:   fallback,
		},
		{
			name:   "field path through a string: body hash",
			reason: "id.x cannot be followed into a string",
			cfg:    rest.Config{Header: "X-Signature", EventIDField: "id.x"},
			header: http.Header{"X-Signature": {sign(rest.Config{Header: "X-Signature"}, secret, body)}},
			want:   fallback,
		},
		{
			name:   "nothing configured: body hash",
			reason: "a provider without ids still gets a dedupe key",
			cfg:    b64Cfg,
			header: http.Header{"X-Signature": {sign(b64Cfg, secret, body)}},
			want:   fallback,
		},
		{
			name:   "base64 without padding",
			reason: "padding is optional",
			cfg:    b64Cfg,
			header: http.Header{"X-Signature": {strings.TrimRight(sign(b64Cfg, secret, body), "=")}},
			want:   fallback,
		},
		{
			name:   "upper-case hex",
			reason: "hex digits are decoded in either case",
			cfg:    hexCfg,
			header: http.Header{"X-Signature": {"sha256=" + strings.ToUpper(strings.TrimPrefix(good, "sha256="))}},
			want:   providers.Verified{EventID: "ev_123", ReplayKey: bodyDigest},
		},
		{
			name:    "id header twice",
			reason:  "issue 5: which of two X-Event-Id values to dedupe on would be a guess",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {good}, "X-Event-Id": {"hdr-1", "hdr-2"}},
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "id field twice",
			reason:  "issue 5: a body naming its id twice is refused, not deduped on the last one",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {sign(hexCfg, secret, []byte(`{"id":"ev_1","id":"ev_2"}`))}},
			body:    []byte(`{"id":"ev_1","id":"ev_2"}`),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "id field in another case too",
			reason:  "encoding/json matches \"ID\" to a struct's id field, so the body names the id twice",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {sign(hexCfg, secret, []byte(`{"ID":"ev_1","id":"ev_2"}`))}},
			body:    []byte(`{"ID":"ev_1","id":"ev_2"}`),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:    "an object on the dotted path twice",
			reason:  "data.id is ambiguous when two data objects exist, whichever holds an id",
			cfg:     sha512Cfg,
			header:  http.Header{"X-Signature": {sign(sha512Cfg, secret, []byte(`{"data":{"id":1},"data":{"id":2}}`))}},
			body:    []byte(`{"data":{"id":1},"data":{"id":2}}`),
			wantErr: providers.ErrAmbiguous,
		},
		{
			name:   "repeated keys off the path",
			reason: "only the members on the id field's path must be unambiguous",
			cfg:    sha512Cfg,
			header: http.Header{"X-Signature": {sign(sha512Cfg, secret, []byte(`{"x":1,"x":2,"data":{"id":7,"y":1,"y":2}}`))}},
			body:   []byte(`{"x":1,"x":2,"data":{"id":7,"y":1,"y":2}}`),
			want:   providers.Verified{EventID: "7"},
		},
		{
			name:    "tampered body",
			reason:  "one changed byte must break the signature",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {good}},
			body:    []byte(strings.Replace(string(body), "ev_123", "ev_124", 1)),
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "wrong secret",
			reason:  "a delivery signed with another secret must be refused",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {sign(hexCfg, otherSecret, body)}},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "rotation",
			reason:  "during a rotation overlap both secrets are configured",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {sign(hexCfg, otherSecret, body)}},
			secrets: []string{secret, otherSecret},
			want:    providers.Verified{EventID: "ev_123", ReplayKey: bodyDigest},
		},
		{
			name:    "wrong algorithm",
			reason:  "a SHA-1 digest where SHA-512 is configured has the wrong size",
			cfg:     sha512Cfg,
			header:  http.Header{"X-Signature": {sign(rest.Config{Header: "X-Signature", Algorithm: rest.SHA1}, secret, body)}},
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "hex where base64 is configured",
			reason:  "the encoding is part of the scheme",
			cfg:     b64Cfg,
			header:  http.Header{"X-Signature": {sign(rest.Config{Header: "X-Signature", Algorithm: rest.SHA1}, secret, body)}},
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "missing prefix",
			reason:  "the prefix is matched exactly",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {strings.TrimPrefix(good, "sha256=")}},
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "missing header",
			reason:  "an unsigned request is refused",
			cfg:     hexCfg,
			header:  http.Header{"X-Event-Id": {"hdr-1"}},
			wantErr: providers.ErrNoSignature,
		},
		{
			name:    "two headers",
			reason:  "which one the provider meant is ambiguous",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {good, good}},
			wantErr: providers.ErrMalformed,
		},
		{
			name:    "empty secret",
			reason:  "an empty key is not a secret: a delivery signed with it must not verify",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {sign(hexCfg, "", body)}},
			secrets: []string{""},
			wantErr: providers.ErrBadSignature,
		},
		{
			name:    "no secrets",
			reason:  "with nothing to check against, nothing matches",
			cfg:     hexCfg,
			header:  http.Header{"X-Signature": {good}},
			secrets: []string{},
			wantErr: providers.ErrBadSignature,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.body
			if b == nil {
				b = body
			}
			secrets := providerstest.Secrets(secret)
			if tc.secrets != nil {
				secrets = providerstest.Secrets(tc.secrets...)
			}

			got, err := mustVerifier(t, tc.cfg).Verify(providers.Delivery{Header: tc.header, Body: b}, secrets)

			providerstest.CheckVerify(t, tc.reason, got, err, tc.want, tc.wantErr)
			if err != nil {
				providerstest.CheckRefusal(t, err, secrets, tc.header.Values("X-Signature")...)
			}
		})
	}
}
