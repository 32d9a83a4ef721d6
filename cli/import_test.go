package cli

import (
	"slices"
	"testing"

	"github.com/hookwarden/hookwarden/providers"
)

// A --secret flag naming a registration import would not write (unknown, or owned by another
// subscription and so not importable) is refused, every such id named, in order; the caller's
// map is left as it was.
func TestUnusedSecrets(t *testing.T) {
	secrets := map[string][]byte{"we_2": []byte("s2"), "we_9": []byte("s9"), "we_1": []byte("s1"), "we_0": []byte("s0")}
	importable := []providers.Registration{{ID: "we_1"}, {ID: "we_2"}, {ID: "we_3"}}
	if got, want := unusedSecrets(secrets, importable), []string{"we_0", "we_9"}; !slices.Equal(got, want) {
		t.Errorf("unusedSecrets = %v, want %v", got, want)
	}
	if len(secrets) != 4 {
		t.Errorf("the caller's map lost entries: %v", secrets)
	}
	if got := unusedSecrets(map[string][]byte{"we_1": nil}, importable); len(got) != 0 {
		t.Errorf("unusedSecrets of an importable id = %v, want none", got)
	}
}
