package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Idempotency keys. They are deterministic, so a crash between the provider's answer and the
// status write replays the same request (on providers with replayable creates, Stripe), and
// they change with whatever makes the request a different one.

// CreateKey is deterministic for one generation of subscription uid. It also names the
// registration that was recorded before: when that registration vanishes at the provider, the
// next create gets a new key instead of a replay of the vanished one.
func CreateKey(uid string, generation int64, recordedID string) string {
	k := fmt.Sprintf("hookwarden-create-%s-g%d", uid, generation)
	if recordedID != "" {
		k += "-after-" + shortID(recordedID)
	}
	return k
}

// RotateKey is deterministic per replaced registration and generation, so a crash mid-rotation
// replays it, and a spec edit after such a crash does not replay it with other parameters.
func RotateKey(uid string, generation int64, old string) string {
	return fmt.Sprintf("hookwarden-rotate-%s-g%d-%s", uid, generation, shortID(old))
}

// shortID keeps idempotency keys under Stripe's 255 characters whatever the id length.
func shortID(id string) string {
	if len(id) <= 64 {
		return id
	}
	h := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(h[:16])
}
