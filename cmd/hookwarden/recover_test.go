package main

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/internal/cli"
)

// TestRecoverResumes: a recovery request nobody has handled yet times out (exit 4) with the
// annotation set; the next run follows the same request instead of making a new one. (The
// manager's side, status.recovery, is written by the missed-events work.)
func TestRecoverResumes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "recover")
	sub := tn.stripeSub("orders", "https://hooks.example.com/orders", "invoice.paid")
	g.Expect(env.Client.Create(ctx, sub.DeepCopy())).To(Succeed())

	code, _, stderr := run(t, nil, "recover", "orders", "-n", tn.ns, "--timeout", "1s", "--poll-interval", "100ms")
	g.Expect(code).To(Equal(cli.ExitTimeout), stderr)
	g.Expect(stderr).To(ContainSubstring("recover/orders: recovery requested"))
	live := &hookv1.WebhookSubscription{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), live)).To(Succeed())
	requested := live.Annotations[cli.AnnotationRecoverRequestedAt]
	g.Expect(requested).NotTo(BeEmpty())

	code, _, stderr = run(t, nil, "recover", "-n", tn.ns, "-l", "app=orders", "--timeout", "1s", "--poll-interval", "100ms")
	g.Expect(code).To(Equal(cli.ExitTimeout), stderr)
	g.Expect(stderr).To(ContainSubstring("a recovery requested at " + requested + " is still running: following it"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(sub), live)).To(Succeed())
	g.Expect(live.Annotations[cli.AnnotationRecoverRequestedAt]).To(Equal(requested))
}
