package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// TestOwnWritesRace: the watch may deliver a write's event before the write's answer. The
// manager's own write wakes nobody whichever comes first; someone else's write, seen while ours
// was in flight, wakes the subscription once the answer shows it was not ours.
func TestOwnWritesRace(t *testing.T) {
	sub := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders"}}
	at := func(rv string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders-signing", ResourceVersion: rv}}
	}
	key := client.ObjectKeyFromObject(at(""))
	woken := func(w *ownWrites) bool {
		select {
		case ev := <-w.wake:
			if ev.Object.GetName() != sub.Name || ev.Object.GetNamespace() != sub.Namespace {
				t.Fatalf("woke %s/%s, want %s/%s", ev.Object.GetNamespace(), ev.Object.GetName(), sub.Namespace, sub.Name)
			}
			return true
		default:
			return false
		}
	}

	w := newOwnWrites()
	w.begin(key)
	if !w.own(at("7")) {
		t.Fatal("an event that came while the write was in flight passed")
	}
	w.end(sub, key, at("7"))
	if woken(w) {
		t.Fatal("the write's own event, come before its answer, woke the subscription")
	}
	if w.own(at("7")) {
		t.Fatal("a second event of version 7 (a resync, after the first was consumed) was dropped")
	}

	w.begin(key)
	w.end(sub, key, at("8"))
	if !w.own(at("8")) || woken(w) {
		t.Fatal("the write's event, come after its answer, was not taken as the manager's own")
	}

	w.begin(key)
	w.own(at("9"))
	w.own(at("10")) // someone else's, right after ours
	w.end(sub, key, at("9"))
	if !woken(w) {
		t.Fatal("someone else's write, seen while ours was in flight, woke nobody")
	}

	w.begin(key)
	w.own(at("11"))
	w.end(sub, key, nil) // our write failed: version 11 was someone else's
	if !woken(w) {
		t.Fatal("an event held back during a write that failed woke nobody")
	}
	if w.own(at("12")) {
		t.Fatal("an event after every write was answered was dropped")
	}
}
