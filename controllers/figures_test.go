package controllers_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// The surfaces' figures (issue 32's closing note): what a first reconcile and a steady resync
// send, and how long a rotation's old and new secrets are held together, printed as REPORT
// lines by the scenarios that do those things. Every fake's log is reduced to calls first.

// call is one logged request as the REPORT lines name it: its method and its path with the
// scenario's own names (workspace, hook id) replaced by placeholders.
type call struct{ method, path string }

// tally is "GET /x ×2, PATCH /y ×1 (3 in all)", in the order each call was first seen.
func tally(calls []call) string {
	if len(calls) == 0 {
		return "nothing (0 in all)"
	}
	var order []call
	n := map[call]int{}
	for _, c := range calls {
		if n[c] == 0 {
			order = append(order, c)
		}
		n[c]++
	}
	parts := make([]string, 0, len(order))
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%s %s ×%d", c.method, c.path, n[c]))
	}
	return fmt.Sprintf("%s (%d in all)", strings.Join(parts, ", "), len(calls))
}

// reportRequests prints what surface sent in phase.
func reportRequests(surface, phase string, calls []call) {
	fmt.Printf("REPORT requests %s %s: %s\n", surface, phase, tally(calls))
}

// expectReadsOnly expects a steady resync's calls to be reads (GET) only, and at least one.
func expectReadsOnly(calls []call) {
	ExpectWithOffset(1, calls).NotTo(BeEmpty(), "the resync re-read the provider")
	for _, c := range calls {
		ExpectWithOffset(1, c.method).To(Equal(http.MethodGet), "a steady resync writes nothing: %s", tally(calls))
	}
}

// settled waits until count has stopped growing (unchanged over 1.5 s) and returns it: the
// end of a burst of reconciles when the resync interval is long.
func settled(count func() int) int {
	var n int
	EventuallyWithOffset(1, func() bool {
		n = count()
		time.Sleep(1500 * time.Millisecond)
		return count() == n
	}).WithTimeout(30 * time.Second).WithPolling(10 * time.Millisecond).Should(BeTrue())
	return n
}

// overlapWatch polls a signing Secret while a rotation runs and notes when it held the old
// secret and another one together.
type overlapWatch struct {
	start       time.Time
	stop, done  chan struct{}
	mu          sync.Mutex
	first, last time.Time // the overlap's start and end; zero while not seen
}

// watchOverlap starts watching the signing Secret of s, whose current secret is old; start it
// before the rotation is requested. It sees every version the API server stores (a watch, not
// a poll: the rotation's versions may live a few milliseconds only).
func watchOverlap(s *hookv1.WebhookSubscription, old string) *overlapWatch {
	w := &overlapWatch{start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	watch, err := wc.Watch(suiteCtx, &corev1.SecretList{}, client.InNamespace(s.Namespace),
		client.MatchingFields{"metadata.name": s.Spec.SigningSecret.Name})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer close(w.done)
		defer watch.Stop()
		for {
			select {
			case <-w.stop:
				return
			case ev, ok := <-watch.ResultChan():
				if !ok {
					return
				}
				if sec, isSecret := ev.Object.(*corev1.Secret); isSecret {
					w.saw(time.Now(), holdsBoth(sec, old))
				}
			}
		}
	}()
	return w
}

// saw notes a version of the Secret seen at now: the overlap starts with the first version
// holding both and ends with the next one that does not.
func (w *overlapWatch) saw(now time.Time, both bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case both && w.first.IsZero():
		w.first = now
	case !both && !w.first.IsZero() && w.last.IsZero():
		w.last = now
	}
}

// holdsBoth reports whether sec holds old and a secret other than old (current, pending or a
// registration's key).
func holdsBoth(sec *corev1.Secret, old string) bool {
	var hasOld, hasNew bool
	for k, v := range sec.Data {
		if k == hookv1.SecretKeyVerifier || len(v) == 0 {
			continue
		}
		if string(v) == old {
			hasOld = true
		} else {
			hasNew = true
		}
	}
	return hasOld && hasNew
}

// report stops the watch and prints what it saw, then writes: what the rotation sent the
// provider and what that means for the old secret.
func (w *overlapWatch) report(surface, writes string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first.IsZero() {
		fmt.Printf("REPORT rotation-overlap %s: no overlap: the receiver's Secret never held the old and the new secret together (every stored version watched); %s\n", surface, writes)
		return
	}
	if w.last.IsZero() {
		w.last = time.Now() // still both when the scenario ended
	}
	fmt.Printf("REPORT rotation-overlap %s: the receiver's Secret held both secrets from %.2f s to %.2f s after the rotation was requested (%.3f s, every stored version watched); %s\n",
		surface, w.first.Sub(w.start).Seconds(), w.last.Sub(w.start).Seconds(), w.last.Sub(w.first).Seconds(), writes)
}
