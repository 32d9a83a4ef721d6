package controllers

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownWrites remembers the resource version of the manager's own latest write to each signing
// Secret, so the watch on signing Secrets wakes a subscription for what others did (a Secret
// edited or deleted by hand) and not for what its own reconcile just wrote: that reconcile
// already acts on it, and a wake-up per write would turn every refusal into a loop and double
// the work of every create.
type ownWrites struct {
	mu sync.Mutex
	rv map[client.ObjectKey]string
}

func newOwnWrites() *ownWrites { return &ownWrites{rv: map[client.ObjectKey]string{}} }

// record notes obj's resource version as written by the manager.
func (w *ownWrites) record(obj client.Object) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rv[client.ObjectKeyFromObject(obj)] = obj.GetResourceVersion()
}

// own reports whether obj, as a watch sees it, is exactly the manager's latest write; the
// record is consumed, so a later event for the same version (a resync) is not dropped twice.
func (w *ownWrites) own(obj client.Object) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
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
