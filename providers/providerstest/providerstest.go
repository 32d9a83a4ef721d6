// Package providerstest holds the checks every verifier's tests share.
package providerstest

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/providers"
)

// Headers builds a delivery's headers from key/value pairs; pairs with an empty value are left
// out.
func Headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			h.Add(kv[i], kv[i+1])
		}
	}
	return h
}

// Secrets returns the secrets as Verify takes them.
func Secrets(ss ...string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}

// CheckVerify fails t unless err wraps wantErr (nil: no error) and got is want. reason is the
// table case's.
func CheckVerify(t testing.TB, reason string, got providers.Verified, err error, want providers.Verified, wantErr error) {
	t.Helper()
	if !errors.Is(err, wantErr) {
		t.Fatalf("%s\nVerify() error = %v, want %v", reason, err, wantErr)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s\nVerify() mismatch (-want +got):\n%s", reason, diff)
	}
}

// leakRun is the shortest run of a secret or signature that counts as a leak; shorter runs
// occur in fixed text by chance.
const leakRun = 16

// CheckRefusal fails t unless err wraps one of the verification sentinels and its message shares
// no run of 16 characters with any secret or signature header value: a refusal says why without
// echoing what was configured or sent. A run also catches a secret without its "whsec_" prefix
// and a signature without its scheme prefix.
func CheckRefusal(t testing.TB, err error, secrets [][]byte, signatureHeaders ...string) {
	t.Helper()
	if !isSentinel(err) {
		t.Errorf("error %v wraps no verification sentinel", err)
		return
	}
	msg := err.Error()
	for _, s := range secrets {
		if sharesRun(msg, string(s)) {
			t.Errorf("error %q contains a secret", msg)
		}
	}
	for _, h := range signatureHeaders {
		if sharesRun(msg, h) {
			t.Errorf("error %q contains a signature", msg)
		}
	}
}

func sharesRun(msg, s string) bool {
	for i := 0; i+leakRun <= len(s); i++ {
		if strings.Contains(msg, s[i:i+leakRun]) {
			return true
		}
	}
	return false
}

func isSentinel(err error) bool {
	for _, s := range []error{providers.ErrNoSignature, providers.ErrBadSignature, providers.ErrMalformed,
		providers.ErrTooOld, providers.ErrTooNew, providers.ErrNoEventID, providers.ErrAmbiguous} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
