package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// A registration's id becomes a key of the signing Secret the API server accepts, and reads back
// as the same id; ids that were valid keys keep the key they always had.
func TestSecretKeyFor(t *testing.T) {
	for id, want := range map[string]string{
		"we_1NwTSl2eZvKYlo2C":                    "whsec.we_1NwTSl2eZvKYlo2C",
		"12345":                                  "whsec.12345",
		"ed_61RM8ltWcZyfMH1Ya16RM8ltWcZyfMH1YaU": "whsec.ed_61RM8ltWcZyfMH1Ya16RM8ltWcZyfMH1YaU",
		"{a1b2c3d4-0000-4000-8000-000000000001}": "whsec-hex.7b61316232633364342d303030302d343030302d383030302d3030303030303030303030317d",
		"PXXXXXX/1":                              "whsec-hex.505858585858582f31",
	} {
		key := SecretKeyFor(id)
		if key != want {
			t.Errorf("SecretKeyFor(%q) = %q, want %q", id, key, want)
		}
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			t.Errorf("SecretKeyFor(%q) = %q, which the API server refuses: %v", id, key, errs)
		}
		if got, ok := SecretIDOf(key); !ok || got != id {
			t.Errorf("SecretIDOf(%q) = %q, %v; want %q", key, got, ok, id)
		}
	}
	for _, key := range []string{SecretKeyCurrent, SecretKeyPending, SecretKeyVerifier, "whsec.", "whsec-hex.", "whsec-hex.zz", "other"} {
		if id, ok := SecretIDOf(key); ok {
			t.Errorf("SecretIDOf(%q) = %q, want no registration", key, id)
		}
	}
}
