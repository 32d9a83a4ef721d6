package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/providers/rest/fakes/gitlab"
)

// TestImportRESTBuiltinProfile: `import --provider rest --profile gitlab-project-hooks` reads a
// GitLab project through the built-in profile (it used to store the name as profile text, which
// failed to decode). A hook made by hand is imported, naming the profile in
// spec.provider.rest.builtin; a hook carrying another cluster's marker is refused. Applied, the
// manager resolves the built-in profile and adopts the hand-made hook without a create (GitLab
// masks its token: a new one is set on the same hook); the other cluster's hook is untouched.
func TestImportRESTBuiltinProfile(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	gl := gitlab.New()
	glURL, stopGL := gl.Start()
	defer stopGL()
	tn := newTenant(t, g, "import-rest")
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "gitlab-token"}, StringData: map[string]string{"token": "glpat-import"}})).To(Succeed())
	gl.AddProject("7001", "acme/shop")
	foreign := gl.Seed("7001", gitlab.Hook{URL: "https://hooks.example.com/gl/ci", Name: "CI trigger", SSL: true, Token: "theirs",
		Flags: map[string]bool{"push_events": true, "merge_requests_events": true}})
	otherMarker := "hookwarden:other-cluster/elsewhere/theirs/uid-theirs" // providers/rest/object.go's spelling
	other := gl.Seed("7001", gitlab.Hook{URL: "https://hooks.example.com/gl/theirs", Name: otherMarker, SSL: true, Token: "other-cluster-token",
		Flags: map[string]bool{"push_events": true}})
	foreignID, otherID := strconv.Itoa(foreign), strconv.Itoa(other)

	code, out, stderr := run(t, nil, "import", "--provider", "rest", "--profile", "gitlab-project-hooks", "--parameter", "project=acme/shop",
		"--credentials", "gitlab-token", "--api-url", glURL+"/api/v4", "-n", tn.ns, "--cluster-name", clusterName)
	t.Logf("REPORT import rest stderr:\n%s", stderr)
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	name := "gitlab-project-hooks-" + foreignID
	g.Expect(stderr).To(ContainSubstring(fmt.Sprintf("imported %s (https://hooks.example.com/gl/ci) as %s/%s: the provider masks its secret: a new secret is set on the same registration", foreignID, tn.ns, name)))
	g.Expect(stderr).To(ContainSubstring(fmt.Sprintf(`refused %s (https://hooks.example.com/gl/theirs): carries the ownership marker of cluster "other-cluster"`, otherID)))
	g.Expect(out).To(ContainSubstring("builtin: gitlab-project-hooks"))
	g.Expect(out).NotTo(ContainSubstring("profile:"))
	g.Expect(out).NotTo(ContainSubstring("https://hooks.example.com/gl/theirs"))
	g.Expect(strings.Count(out, "kind: WebhookSubscription")).To(Equal(1))

	imported, stop := applyImported(t, g, out)
	defer stop()
	g.Expect(imported).To(HaveLen(1))
	live := expectReady(g, imported[0])
	g.Expect(live.Status.EndpointID).To(Equal(foreignID))
	creates, updates := 0, map[string]int{}
	for _, r := range gl.Requests() {
		switch {
		case r.Method == "POST" && strings.HasSuffix(r.Path, "/hooks"):
			creates++
		case r.Method == "PUT":
			updates[r.Path[strings.LastIndex(r.Path, "/")+1:]]++
		}
	}
	t.Logf("REPORT applied: GitLab creates %d, updates %v", creates, updates)
	g.Expect(creates).To(BeZero())
	g.Expect(updates[otherID]).To(BeZero(), "the other cluster's hook")
	hooks := map[int]gitlab.Hook{}
	for _, h := range gl.Hooks("7001") {
		hooks[h.ID] = h
	}
	g.Expect(hooks).To(HaveLen(2))
	g.Expect(hooks[foreign].Token).NotTo(Equal("theirs"), "a new token on the same hook")
	g.Expect(hooks[foreign].Name).To(Equal("CI trigger [hookwarden:"+clusterName+"/"+tn.ns+"/"+name+"/"+string(live.UID)+"]"), "the name given by hand kept, the marker after it")
	g.Expect(hooks[other].Name).To(Equal(otherMarker))
	g.Expect(hooks[other].Token).To(Equal("other-cluster-token"))

	// Gone before this test's fake GitLab is: the managers of later tests must not reach it.
	g.Expect(env.Client.Delete(ctx, live)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(live), &hookv1.WebhookSubscription{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
}

// TestRESTProfileChoiceIsValidated: the CRD takes one profile, and a built-in one by a name the
// binaries ship.
func TestRESTProfileChoiceIsValidated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "rest-crd")
	sub := func(rest hookv1.RESTProvider) *hookv1.WebhookSubscription {
		return &hookv1.WebhookSubscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, GenerateName: "gl-"},
			Spec: hookv1.WebhookSubscriptionSpec{
				Provider:      hookv1.ProviderSpec{Type: hookv1.ProviderREST, CredentialsRef: hookv1.SecretKeySelector{Name: "gitlab-token"}, REST: &rest},
				Endpoint:      hookv1.EndpointSpec{URL: "https://hooks.example.com/gl"},
				Events:        []string{"push"},
				SigningSecret: hookv1.SigningSecretSpec{Name: "gl-signing"},
			},
		}
	}
	createUnreconciled(t, g, sub(hookv1.RESTProvider{Builtin: "gitlab-project-hooks", Parameters: map[string]string{"project": "1"}}))
	err := env.Client.Create(ctx, sub(hookv1.RESTProvider{Builtin: "gitlab-project-hooks", Profile: "kind: Profile"}))
	g.Expect(err).To(MatchError(ContainSubstring("spec.provider.rest: set exactly one of builtin, profileRef or profile")))
	err = env.Client.Create(ctx, sub(hookv1.RESTProvider{}))
	g.Expect(err).To(MatchError(ContainSubstring("spec.provider.rest: set exactly one of builtin, profileRef or profile")))
	err = env.Client.Create(ctx, sub(hookv1.RESTProvider{Builtin: "gitlab"}))
	g.Expect(err).To(MatchError(ContainSubstring(`spec.provider.rest.builtin: Unsupported value: "gitlab"`)))
}
