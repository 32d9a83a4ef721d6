package main

import (
	"bytes"
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/cli"
	"github.com/hookwarden/hookwarden/providers/rest/profiles"
)

// runFirst runs the command line with --kubeconfig before args (cobra's __complete takes the
// word to complete last) and o's hooks. Under -short (make unit) no control plane runs: args
// go alone, for the commands that need no cluster (completion scripts, version).
func runFirst(t *testing.T, o cli.Options, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o.Streams = genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if env != nil {
		args = append([]string{"--kubeconfig", env.Kubeconfig}, args...)
	}
	code = cli.Run(ctx, args, o)
	return code, out.String(), errOut.String()
}

// createUnreconciled creates sub for a test that runs no manager, and deletes it when the test
// ends: the managers of later tests would otherwise reconcile it too.
func createUnreconciled(t *testing.T, g *WithT, sub *hookv1.WebhookSubscription) {
	t.Helper()
	g.Expect(env.Client.Create(context.Background(), sub)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sub) })
}

// completions are the candidates of a __complete answer (its last line is the directive).
func completions(g *WithT, out string) []string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	g.Expect(lines[len(lines)-1]).To(Equal(":4"), "ShellCompDirectiveNoFileComp: never file names")
	return lines[:len(lines)-1]
}

// TestCompletion: subscription names (of -n's namespace, without those already given),
// namespaces, the kubeconfig's contexts and the built-in profiles complete as kubectl's do.
func TestCompletion(t *testing.T) {
	g := NewWithT(t)
	tn := newTenant(t, g, "complete")
	for _, name := range []string{"orders", "refunds", "repo"} {
		createUnreconciled(t, g, tn.stripeSub(name, "https://hooks.example.com/complete/"+name, "invoice.paid"))
	}
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	var contexts []string
	for name := range kc.Contexts {
		contexts = append(contexts, name)
	}
	sort.Strings(contexts)

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"status NAME", []string{"status", "-n", tn.ns, ""}, []string{"orders", "refunds", "repo"}},
		{"status NAME, a prefix", []string{"status", "-n", tn.ns, "re"}, []string{"refunds", "repo"}},
		{"status takes one NAME", []string{"status", "-n", tn.ns, "orders", ""}, nil},
		{"rotate NAME... leaves out those given", []string{"rotate", "-n", tn.ns, "orders", ""}, []string{"refunds", "repo"}},
		{"recover NAME...", []string{"recover", "-n", tn.ns, "ref"}, []string{"refunds"}},
		{"a namespace", []string{"status", "--namespace", "compl"}, []string{tn.ns}},
		{"a context", []string{"plan", "--context", ""}, contexts},
		{"a built-in profile", []string{"import", "--profile", ""}, profiles.Names()},
		{"an output", []string{"status", "-o", ""}, []string{"table", "yaml", "json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			code, out, stderr := runFirst(t, cli.Options{}, append([]string{"__complete"}, tc.args...)...)
			g.Expect(code).To(Equal(cli.ExitOK), stderr)
			got := completions(g, out)
			if tc.want == nil {
				g.Expect(got).To(BeEmpty())
			} else {
				g.Expect(got).To(Equal(tc.want))
			}
		})
	}
	g.Expect(contexts).NotTo(BeEmpty())
}

// TestShellsAndVersion: completion scripts for the four shells, a version command, --version,
// and -v as kubectl's log level (cobra made it --version).
func TestShellsAndVersion(t *testing.T) {
	g := NewWithT(t)
	for shell, marker := range map[string]string{"bash": "__start_hookwarden", "zsh": "#compdef hookwarden", "fish": "complete -c hookwarden", "powershell": "Register-ArgumentCompleter"} {
		code, out, stderr := runFirst(t, cli.Options{}, "completion", shell)
		g.Expect(code).To(Equal(cli.ExitOK), stderr)
		g.Expect(out).To(ContainSubstring(marker), shell)
	}
	code, version, _ := runFirst(t, cli.Options{}, "version")
	g.Expect(code).To(Equal(cli.ExitOK))
	g.Expect(version).To(HavePrefix("hookwarden "))
	code, out, _ := runFirst(t, cli.Options{}, "--version")
	g.Expect(code).To(Equal(cli.ExitOK))
	g.Expect(out).To(Equal(version))
	code, out, _ = runFirst(t, cli.Options{}, "version", "-o", "json")
	g.Expect(code).To(Equal(cli.ExitOK))
	g.Expect(out).To(ContainSubstring(`"goVersion"`))

	var level int
	code, out, stderr := runFirst(t, cli.Options{SetVerbosity: func(l int) { level = l }}, "-v", "6", "version")
	g.Expect(code).To(Equal(cli.ExitOK), stderr)
	g.Expect(level).To(Equal(6))
	g.Expect(out).To(Equal(version))
	code, out, stderr = runFirst(t, cli.Options{}, "-v")
	g.Expect(code).To(Equal(cli.ExitUsage))
	g.Expect(out).To(BeEmpty(), "-v is not --version")
	g.Expect(stderr).To(ContainSubstring("flag needs an argument: 'v' in -v"))
}

// TestNamespaceConventions: -n that disagrees with a manifest's namespace is refused in
// kubectl's words; a namespace without subscriptions is no error for status and plan.
func TestNamespaceConventions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "conv-ns")
	file := filepath.Join(t.TempDir(), "sub.yaml")
	writeManifests(t, file, tn.stripeSub("orders", "https://hooks.example.com/conv", "invoice.paid"))

	code, out, stderr := run(t, nil, "plan", "-f", file, "-n", "default")
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
	g.Expect(out).To(BeEmpty())
	g.Expect(stderr).To(Equal(`error: the namespace from the provided object "conv-ns" does not match the namespace "default". You must pass '--namespace=conv-ns' to perform this operation.` + "\n"))
	code, out, stderr = run(t, nil, "plan", "-f", file, "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitPending), stderr)
	g.Expect(out).To(ContainSubstring("conv-ns/orders"))

	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "conv-empty"}})).To(Succeed())
	for _, cmd := range []string{"status", "plan"} {
		code, out, stderr = run(t, nil, cmd, "-n", "conv-empty")
		g.Expect(code).To(Equal(cli.ExitOK), "%s: %s", cmd, stderr)
		g.Expect(out).To(BeEmpty(), cmd)
		g.Expect(stderr).To(Equal("No resources found in conv-empty namespace.\n"), cmd)
	}
	// A selector matching nothing stays bad input: a typo must not pass a gate.
	code, _, stderr = run(t, nil, "plan", "-n", "conv-empty", "-l", "app=none")
	g.Expect(code).To(Equal(cli.ExitUsage), stderr)
}

// TestPlanListsEachAccountOnce: subscriptions on one account share one list of it, as the
// manager's do (plan listed the account once per subscription).
func TestPlanListsEachAccountOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tn := newTenant(t, g, "plan-one-list")
	const n = 4
	for i := range n {
		name := "sub-" + string(rune('a'+i))
		createUnreconciled(t, g, tn.stripeSub(name, "https://hooks.example.com/one-list/"+name, "invoice.paid"))
	}
	// Another account (a second key) in the same namespace is listed on its own.
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "stripe-other"}, StringData: map[string]string{"apiKey": tn.apiKey + "_other"}})).To(Succeed())
	other := tn.stripeSub("other", "https://hooks.example.com/one-list/other", "invoice.paid")
	other.Spec.Provider.CredentialsRef.Name = "stripe-other"
	createUnreconciled(t, g, other)

	stripeSrv.ResetRequests()
	code, out, stderr := run(t, nil, "plan", "-n", tn.ns, "--cluster-name", clusterName)
	g.Expect(code).To(Equal(cli.ExitPending), stderr)
	g.Expect(strings.Count(out, "create a registration")).To(Equal(n + 1))
	lists := map[string]int{}
	for _, r := range stripeSrv.Requests() {
		if r.Method == "GET" && r.Path == "/v1/webhook_endpoints" && r.Query.Get("starting_after") == "" {
			lists[r.Account]++
		}
	}
	t.Logf("REPORT plan of %d subscriptions on one account and 1 on another: lists (first pages) per account %v", n, lists)
	g.Expect(lists).To(HaveLen(2), "two accounts")
	for acct, n := range lists {
		g.Expect(n).To(Equal(1), "lists of account %s", acct)
	}
}
