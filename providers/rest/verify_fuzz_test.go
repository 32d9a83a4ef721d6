package rest_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/http"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/rest"
)

// FuzzRESTHeader checks, for every algorithm and encoding and any header and body, that Verify
// does not panic, accepts only an encoding of the body's HMAC, never echoes a secret, and that a
// delivery signed with Sign always verifies with an id.
func FuzzRESTHeader(f *testing.F) {
	hexV := mustVerifier(f, rest.Config{Header: "X-Signature", Prefix: "sha256="})
	b64V := mustVerifier(f, rest.Config{Header: "X-Signature", Algorithm: rest.SHA1, Encoding: rest.Base64})
	for _, h := range []string{
		hexV.Sign([]byte(secret), body),
		strings.ToUpper(hexV.Sign([]byte(secret), body)),
		b64V.Sign([]byte(secret), body),
		strings.TrimRight(b64V.Sign([]byte(secret), body), "="),
		"sha256=", "=", "",
	} {
		f.Add(uint8(0), h, body, "ev")
		f.Add(uint8(3), h, body, "")
	}

	type scheme struct {
		v       *rest.Verifier
		prefix  string
		newHash func() hash.Hash
		base64  bool
	}
	var schemes []scheme
	for _, alg := range []struct {
		name    string
		newHash func() hash.Hash
	}{{rest.SHA256, sha256.New}, {rest.SHA1, sha1.New}, {rest.SHA512, sha512.New}} {
		for _, enc := range []string{rest.Hex, rest.Base64} {
			cfg := rest.Config{Header: "X-Signature", Algorithm: alg.name, Encoding: enc, Prefix: alg.name + "=", EventIDField: "meta.id"}
			schemes = append(schemes, scheme{mustVerifier(f, cfg), cfg.Prefix, alg.newHash, enc == rest.Base64})
		}
	}
	secrets := [][]byte{[]byte(otherSecret), []byte(secret)}

	f.Fuzz(func(t *testing.T, pick uint8, header string, payload []byte, id string) {
		s := schemes[int(pick)%len(schemes)]

		// Arbitrary signature header.
		got, err := s.v.Verify(providers.Delivery{Header: sigHeaders(header), Body: payload}, secrets)
		if err == nil {
			if !encodesHMAC(header, s.prefix, s.newHash, s.base64, secrets, payload) {
				t.Fatalf("accepted a header that is not the body's HMAC: %q", header)
			}
			if got.EventID == "" {
				t.Fatalf("accepted with an empty EventID")
			}
		} else {
			providerstest.CheckRefusal(t, err, secrets)
		}

		// A correctly signed delivery always verifies, with an id.
		got, err = s.v.Verify(providers.Delivery{Header: sigHeaders(s.v.Sign([]byte(secret), payload)), Body: payload}, secrets)
		if err != nil || got.EventID == "" {
			t.Fatalf("correctly signed delivery: %+v, %v", got, err)
		}
		if got.IDFallback {
			sum := sha256.Sum256(payload)
			if got.EventID != hex.EncodeToString(sum[:]) {
				t.Fatalf("fallback EventID %q is not the body's SHA-256", got.EventID)
			}
		}

		// The configured field is the id whenever it holds a non-empty string.
		id = strings.ToValidUTF8(id, "?") // json.Marshal would rewrite invalid UTF-8
		event, _ := json.Marshal(map[string]any{"meta": map[string]string{"id": id}})
		got, err = s.v.Verify(providers.Delivery{Header: sigHeaders(s.v.Sign([]byte(secret), event)), Body: event}, secrets)
		if err != nil || got.IDFallback != (id == "") || (id != "" && got.EventID != id) {
			t.Fatalf("signed event with meta.id %q: %+v, %v", id, got, err)
		}
	})
}

func sigHeaders(v string) http.Header { return providerstest.Headers("X-Signature", v) }

// encodesHMAC is an oracle independent of the verifier: header is prefix followed by the HMAC of
// payload under one of the secrets, as hex in either case or as base64 with or without padding
// (line breaks, which Go's base64 decoder skips, removed).
func encodesHMAC(header, prefix string, newHash func() hash.Hash, isBase64 bool, secrets [][]byte, payload []byte) bool {
	enc, ok := strings.CutPrefix(header, prefix)
	if !ok {
		return false
	}
	for _, s := range secrets {
		m := hmac.New(newHash, s)
		m.Write(payload)
		sum := m.Sum(nil)
		if isBase64 {
			enc := strings.NewReplacer("\r", "", "\n", "").Replace(enc)
			if enc == base64.StdEncoding.EncodeToString(sum) || enc == base64.RawStdEncoding.EncodeToString(sum) {
				return true
			}
		} else if strings.EqualFold(enc, hex.EncodeToString(sum)) {
			return true
		}
	}
	return false
}
