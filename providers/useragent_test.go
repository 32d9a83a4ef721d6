package providers

import (
	"strings"
	"testing"
)

func TestUserAgentNamesHookwardenAndItsVersion(t *testing.T) {
	if got, want := userAgent("v1.2.3"), "hookwarden/v1.2.3 (+https://github.com/hookwarden/hookwarden)"; got != want {
		t.Errorf("userAgent = %q; want %q", got, want)
	}
	// A test binary has no linked version: build info gives "devel" or the module version.
	if ua := UserAgent(); !strings.HasPrefix(ua, "hookwarden/") || strings.HasPrefix(ua, "hookwarden/ ") || !strings.HasSuffix(ua, "(+"+ProjectURL+")") {
		t.Errorf("UserAgent = %q", ua)
	}
}
