package github_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/github"
	"github.com/hookwarden/hookwarden/providers/providerstest"
)

// FuzzGitHubHeader checks that, for any signature header, body and delivery GUID, Verify does
// not panic, accepts only the exact HMAC of the body, never echoes a secret, and that a delivery
// signed with Sign always verifies.
func FuzzGitHubHeader(f *testing.F) {
	good := github.Sign([]byte(secret), body)
	for _, h := range []string{good, strings.ToUpper(good), good[7:], "sha1=" + good[7:], good + " ", "sha256=", ""} {
		f.Add(h, body, guid)
	}
	f.Add(docSignature, []byte(docPayload), "")

	secrets := [][]byte{[]byte(otherSecret), []byte(secret)}
	v := github.NewVerifier()

	f.Fuzz(func(t *testing.T, sig string, payload []byte, delivery string) {
		// Arbitrary signature header.
		d := providers.Delivery{Header: headers(github.SignatureHeader, sig, github.DeliveryHeader, delivery), Body: payload}
		got, err := v.Verify(d, secrets)
		if err == nil {
			if !isHMAC(sig, secrets, payload) {
				t.Fatalf("accepted a signature that is not the body's HMAC: %q", sig)
			}
			if got.EventID != delivery || delivery == "" {
				t.Fatalf("EventID = %q, want the delivery GUID %q", got.EventID, delivery)
			}
		} else {
			providerstest.CheckRefusal(t, err, secrets)
		}

		// A correctly signed delivery always verifies (or lacks only its GUID).
		d.Header = headers(github.SignatureHeader, github.Sign([]byte(secret), payload), github.DeliveryHeader, delivery)
		got, err = v.Verify(d, secrets)
		switch {
		case delivery == "" && !errors.Is(err, providers.ErrNoEventID):
			t.Fatalf("signed delivery without GUID: error %v, want ErrNoEventID", err)
		case delivery != "" && (err != nil || got.EventID != delivery):
			t.Fatalf("signed delivery: %+v, %v; want EventID %q", got, err, delivery)
		}
	})
}

// isHMAC is an oracle independent of the verifier: sig is "sha256=" and the hex HMAC-SHA256 of
// payload under one of the secrets (hex digits in either case).
func isHMAC(sig string, secrets [][]byte, payload []byte) bool {
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return false
	}
	for _, s := range secrets {
		m := hmac.New(sha256.New, s)
		m.Write(payload)
		if strings.EqualFold(hexSig, hex.EncodeToString(m.Sum(nil))) {
			return true
		}
	}
	return false
}
