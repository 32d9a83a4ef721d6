package providers_test

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

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

func TestCheckAge(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cases := []struct {
		reason  string
		now     time.Time
		signed  int64
		wantErr error
	}{
		{"exactly maxAge old", now, now.Unix() - 300, nil},
		{"one second older than maxAge", now, now.Unix() - 301, providers.ErrTooOld},
		{"exactly maxAhead ahead", now, now.Unix() + 60, nil},
		{"one second beyond maxAhead", now, now.Unix() + 61, providers.ErrTooNew},
		{"300 years ahead: past where a time.Duration saturates", now, now.AddDate(300, 0, 0).Unix(), providers.ErrTooNew},
		{"the largest int64 is clamped, not overflowed", now, math.MaxInt64, providers.ErrTooNew},
		{"the smallest int64 is clamped, not overflowed", now, math.MinInt64, providers.ErrTooOld},
		{"a zero now is the wall clock", time.Time{}, time.Now().Unix(), nil},
	}
	for _, c := range cases {
		err := providers.CheckAge("test", c.now, c.signed, 300*time.Second, 60*time.Second)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("%s: CheckAge = %v, want %v", c.reason, err, c.wantErr)
		}
	}
}
