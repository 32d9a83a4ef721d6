package standardwebhooks_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/providerstest"
	"github.com/hookwarden/hookwarden/providers/standardwebhooks"
)

// FuzzStandardWebhooksHeader checks that, for any id, timestamp, signature header and body,
// Verify does not panic, accepts only a header that lists the message's v1 HMAC, never echoes a
// secret, and that a message signed with Sign inside the tolerance always verifies.
func FuzzStandardWebhooksHeader(f *testing.F) {
	ts := strconv.Itoa(vecTimestamp)
	sig := strings.TrimPrefix(vecSignature, "v1,")
	for _, s := range []string{
		vecSignature,
		"v1a," + sig + " " + vecSignature,
		"v1," + sig + "," + vecSignature,
		"v1," + strings.TrimRight(sig, "="),
		"v1, " + sig,
		"  ",
		"v1,",
		"",
	} {
		f.Add(vecID, ts, s, []byte(vecBody), int64(0))
	}
	f.Add("", "-9223372036854775808", vecSignature, []byte("{}"), int64(-1))
	f.Add("msg", "9223372036854775807", vecSignature, []byte(`{"type":1}`), int64(1<<40))

	secrets := [][]byte{[]byte(otherSecret), []byte(vecSecret)}
	keys := [][]byte{mustKey(f, otherSecret), mustKey(f, vecSecret)}
	v := standardwebhooks.NewVerifier()

	f.Fuzz(func(t *testing.T, id, ts, sigHeader string, body []byte, skew int64) {
		// Arbitrary headers.
		h := headers(standardwebhooks.HeaderID, id, standardwebhooks.HeaderTimestamp, ts, standardwebhooks.HeaderSignature, sigHeader)
		got, err := v.Verify(providers.Delivery{Header: h, Body: body, Now: vecNow}, secrets)
		if err == nil {
			if !listsHMAC(sigHeader, keys, id, ts, body) {
				t.Fatalf("accepted a signature header without the message's HMAC: %q", sigHeader)
			}
			if got.EventID != id || id == "" {
				t.Fatalf("EventID = %q, want webhook-id %q", got.EventID, id)
			}
		} else {
			providerstest.CheckRefusal(t, err, secrets)
		}

		// A correctly signed message inside the tolerance always verifies (or lacks only its id).
		signedAt := vecNow.Add(time.Duration(skew%301) * time.Second)
		h = headers(standardwebhooks.HeaderID, id, standardwebhooks.HeaderTimestamp, strconv.FormatInt(signedAt.Unix(), 10),
			standardwebhooks.HeaderSignature, standardwebhooks.Sign(keys[1], id, signedAt, body))
		got, err = v.Verify(providers.Delivery{Header: h, Body: body, Now: vecNow}, secrets)
		switch {
		case id == "" && !errors.Is(err, providers.ErrNoEventID):
			t.Fatalf("signed message without id: error %v, want ErrNoEventID", err)
		case id != "" && (err != nil || got.EventID != id):
			t.Fatalf("signed message: %+v, %v; want EventID %q", got, err, id)
		}
	})
}

// listsHMAC is an oracle independent of the verifier: some space-separated entry of sigHeader is
// exactly "v1," and the base64 HMAC-SHA256 of "{id}.{ts}.{body}" under one of the keys.
func listsHMAC(sigHeader string, keys [][]byte, id, ts string, body []byte) bool {
	for _, key := range keys {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		for _, entry := range strings.Split(sigHeader, " ") {
			if entry == want {
				return true
			}
		}
	}
	return false
}
