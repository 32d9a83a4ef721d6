package receiver_test

import (
	"fmt"
	"testing"

	"github.com/hookwarden/hookwarden/providers/github"
)

// Issue 4: GitHub signs the body only, not X-GitHub-Delivery, so a captured delivery resent
// under a fresh GUID verified and reached the sink a second time. Now the receiver also dedupes
// on the signed bytes: the replay is answered as a duplicate and nothing is enqueued. A
// redelivery (same GUID, same body) stays a duplicate, and the same delivery to another
// subscription (an organization hook beside a repository hook) is that subscription's own.
func TestCapturedGitHubDeliveryCannotBeReplayed(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			s := newStack(t, kind)
			body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":"%s","pusher":{"name":"octocat"}}`, randomID(40))
			original := githubDelivery("6f3c1e2a-0001-11f0-8e8c-"+randomID(12), "push", body)
			replay := githubDelivery("6f3c1e2a-0002-11f0-8e8c-"+randomID(12), "push", body)
			// The attacker copies the captured signature; the fresh GUID is the only change.
			replay.header.Set(github.SignatureHeader, original.header.Get(github.SignatureHeader))
			orgHook := original
			orgHook.path, orgHook.source, orgHook.uid = orgPath, orgSource, orgUID

			first := s.post(t, original)
			s.checkDelivered(t, original)
			again := s.post(t, replay)
			redelivery := s.post(t, original)
			other := s.post(t, orgHook)
			s.checkDelivered(t, orgHook)
			// Nothing else is queued: the replay enqueued no job of its own.
			eventually(t, "an empty queue", func() bool { return s.depth(t) == 0 })
			replayed := len(s.sink.arrivals(replay.source, replay.id))

			fmt.Printf("REPORT github-replay %s: original → %s, sink got it %d×; replay under a fresh X-GitHub-Delivery → %s, sink got the fresh id %d×; redelivery (same GUID) → %s; same delivery to the organization hook's subscription → %s, sink got it %d×\n",
				kind, first.wire(), len(s.sink.arrivals(original.source, original.id)), again.wire(), replayed, redelivery.wire(), other.wire(), len(s.sink.arrivals(orgHook.source, orgHook.id)))
			if first != (answer{202, "accepted"}) {
				t.Errorf("original: %v, want 202 accepted", first)
			}
			if again != (answer{200, "duplicate"}) || replayed != 0 {
				t.Errorf("replay under a fresh GUID: %v and %d deliveries to the sink, want 200 duplicate and none", again, replayed)
			}
			if redelivery != (answer{200, "duplicate"}) {
				t.Errorf("redelivery: %v, want 200 duplicate", redelivery)
			}
			if other != (answer{202, "accepted"}) {
				t.Errorf("the organization hook's delivery: %v, want 202 accepted (another subscription)", other)
			}
		})
	}
}
