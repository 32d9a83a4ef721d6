package controllers

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

// ownWrites remembers the resource version of the manager's own latest write to each signing
// Secret, so the watch on signing Secrets wakes a subscription for what others did (a Secret
// edited or deleted by hand) and not for what its own reconcile just wrote: that reconcile
// already acts on it, and a wake-up per write would turn every refusal into a loop and double
// the work of every create.
//
// The watch may deliver a write's event before the write's own answer (a busy API server
// answers on one stream and notifies on another): a third of the new subscriptions of a cold
// start were woken again so. While a write is in flight its Secret's events are held back, and
// when the answer comes the ones of any other version are delivered after all (wake), as a
// wake-up of the subscription.
type ownWrites struct {
	mu sync.Mutex
	rv map[client.ObjectKey]string
	// writing holds, per Secret with a write in flight, the versions of the events held back.
	writing map[client.ObjectKey][]string
	// wake carries the wake-ups of held-back events that were not the write's (a source of
	// the controller).
	wake chan event.GenericEvent
}

func newOwnWrites() *ownWrites {
	return &ownWrites{rv: map[client.ObjectKey]string{}, writing: map[client.ObjectKey][]string{}, wake: make(chan event.GenericEvent, 64)}
}

// begin notes that a write of the Secret key is about to be sent.
func (w *ownWrites) begin(key client.ObjectKey) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writing[key] = []string{}
}

// end notes the write of the Secret key begun for sub as answered: written is the Secret as
// written (nil: the write failed). Its version is the manager's own, unless its event came
// already; an event held back meanwhile of another version (someone else's write) wakes sub.
func (w *ownWrites) end(sub *hookv1.WebhookSubscription, key client.ObjectKey, written client.Object) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	held := w.writing[key]
	delete(w.writing, key)
	rv := ""
	if written != nil {
		rv = written.GetResourceVersion()
		if !slices.Contains(held, rv) {
			w.rv[key] = rv
		}
	}
	if slices.ContainsFunc(held, func(v string) bool { return v != rv }) {
		ev := event.GenericEvent{Object: &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: sub.Namespace, Name: sub.Name}}}
		select {
		case w.wake <- ev:
		default: // the controller drains wake; never hold the reconcile up for it
			go func() { w.wake <- ev }()
		}
	}
}

// own reports whether obj, as a watch sees it, is exactly the manager's latest write, or an
// event of a Secret with a write in flight (held back until the write's answer, see end); the
// record is consumed, so a later event for the same version (a resync) is not dropped twice.
func (w *ownWrites) own(obj client.Object) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	if held, ok := w.writing[key]; ok {
		w.writing[key] = append(held, obj.GetResourceVersion())
		return true
	}
	if rv, ok := w.rv[key]; ok && rv == obj.GetResourceVersion() {
		delete(w.rv, key)
		return true
	}
	return false
}

// notOwn passes the events of objects the manager did not just write itself; deletions always.
func (w *ownWrites) notOwn() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return !w.own(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return !w.own(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
}
