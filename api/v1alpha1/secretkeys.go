package v1alpha1

import (
	"encoding/hex"
	"strings"
)

// SecretKeyHexPrefix prefixes the key of a registration whose id is not a valid Secret key's
// tail ("whsec-hex.<id in hex>"): a Secret's keys may hold only letters, digits, '-', '_' and
// '.', and some providers' ids hold more (a Bitbucket hook's uuid is "{…}"). It never starts with
// SecretKeyPrefix, so the two forms cannot be taken for each other.
const SecretKeyHexPrefix = "whsec-hex."

// SecretKeyFor is the signing Secret's key for the secret of registration id: "whsec.<id>", or
// "whsec-hex.<hex of id>" when id holds a character a Secret key may not.
func SecretKeyFor(id string) string {
	for _, c := range id {
		if !keyChar(c) {
			return SecretKeyHexPrefix + hex.EncodeToString([]byte(id))
		}
	}
	return SecretKeyPrefix + id
}

// keyChar reports whether a Secret's key may hold c.
func keyChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

// SecretIDOf is the registration id a signing Secret's key holds the secret of (SecretKeyFor
// read back); ok is false for any other key.
func SecretIDOf(key string) (id string, ok bool) {
	if id, ok := strings.CutPrefix(key, SecretKeyPrefix); ok {
		return id, id != ""
	}
	if h, ok := strings.CutPrefix(key, SecretKeyHexPrefix); ok {
		b, err := hex.DecodeString(h)
		return string(b), err == nil && len(b) > 0
	}
	return "", false
}

// IsRegistrationSecretKey reports whether key holds a registration's secret (SecretKeyFor).
func IsRegistrationSecretKey(key string) bool {
	_, ok := SecretIDOf(key)
	return ok
}
