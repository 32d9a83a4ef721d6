package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestSigningMemo: a remembered Secret is handed out only while the watch shows its version;
// another version, or a Secret gone, is read again.
func TestSigningMemo(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	watch := fake.NewClientBuilder().WithScheme(scheme).Build()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-signing"}, Data: map[string][]byte{"signingSecret": []byte("one")}}
	if err := watch.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(sec)
	m := newSigningMemo(watch)
	if m.lookup(ctx, key) != nil {
		t.Fatal("lookup of a Secret never remembered returned one")
	}
	m.remember(sec)
	got := m.lookup(ctx, key)
	if got == nil || string(got.Data["signingSecret"]) != "one" {
		t.Fatalf("lookup while the watch shows the remembered version = %v, want the remembered Secret", got)
	}
	got.Data["signingSecret"] = []byte("changed by the caller")
	if again := m.lookup(ctx, key); string(again.Data["signingSecret"]) != "one" {
		t.Fatal("lookup hands out the memo's own copy: a caller's change leaked into it")
	}

	edited := sec.DeepCopy()
	edited.Data["signingSecret"] = []byte("two")
	if err := watch.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if got := m.lookup(ctx, key); got != nil {
		t.Fatalf("lookup after someone else wrote version %s handed out version %s", edited.ResourceVersion, got.ResourceVersion)
	}
	m.remember(edited)
	if got := m.lookup(ctx, key); got == nil || string(got.Data["signingSecret"]) != "two" {
		t.Fatalf("lookup after remembering the new version = %v", got)
	}
	if err := watch.Delete(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if got := m.lookup(ctx, key); got != nil {
		t.Fatal("lookup of a Secret the watch no longer shows returned the remembered one")
	}
	var none *signingMemo
	none.remember(sec)
	if none.lookup(ctx, key) != nil {
		t.Fatal("a nil memo remembered something")
	}
}
