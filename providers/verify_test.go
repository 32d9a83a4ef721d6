package providers_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/providers"
)

func TestMatchAny(t *testing.T) {
	sign := func(secret []byte) []byte { return append([]byte("sig:"), secret...) }
	cases := []struct {
		reason      string
		secrets     [][]byte
		sigs        [][]byte
		wantMatched bool
		wantUsable  int
	}{
		{"one secret, its signature", [][]byte{[]byte("a")}, [][]byte{[]byte("sig:a")}, true, 1},
		{"rotation: the second secret signed", [][]byte{[]byte("old"), []byte("new")}, [][]byte{[]byte("sig:new")}, true, 2},
		{"several signatures: the second one matches", [][]byte{[]byte("a")}, [][]byte{[]byte("sig:x"), []byte("sig:a")}, true, 1},
		{"wrong secret", [][]byte{[]byte("a")}, [][]byte{[]byte("sig:b")}, false, 1},
		{"empty secrets are never used, not even against an empty-secret signature", [][]byte{nil, {}}, [][]byte{[]byte("sig:")}, false, 0},
		{"no signatures", [][]byte{[]byte("a")}, nil, false, 1},
	}
	for _, c := range cases {
		matched, usable := providers.MatchAny(c.secrets, sign, c.sigs...)
		if matched != c.wantMatched || usable != c.wantUsable {
			t.Errorf("%s: MatchAny = %v, %d; want %v, %d", c.reason, matched, usable, c.wantMatched, c.wantUsable)
		}
	}
}

func TestVerifyErrorWrapsTheSentinel(t *testing.T) {
	err := providers.VerifyError("stripe", providers.ErrTooOld, "timestamp %s old", "6m0s")
	if !errors.Is(err, providers.ErrTooOld) {
		t.Errorf("errors.Is(%v, ErrTooOld) = false", err)
	}
	if got := err.Error(); !strings.HasPrefix(got, "stripe: ") || !bytes.Contains([]byte(got), []byte("6m0s")) {
		t.Errorf("message %q: want the provider prefix and the detail", got)
	}
}
