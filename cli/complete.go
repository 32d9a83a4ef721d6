package cli

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/providers/rest/profiles"
)

// Shell completion, as kubectl's: subscription names from the cluster (in -n's namespace),
// namespaces, the kubeconfig's contexts; what cannot be listed completes to nothing (never to
// file names), and an unreachable cluster costs at most completionTimeout.

const completionTimeout = 5 * time.Second

// registerCompletions adds the completions of the flags every command shares.
func (g *globals) registerCompletions(root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return withPrefix(g.listNames(cmd, &corev1.NamespaceList{}, false), toComplete, nil), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", g.completeContexts)
	_ = root.RegisterFlagCompletionFunc("output", fixedCompletion("table", "yaml", "json"))
}

func fixedCompletion(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeSubscriptions completes subscription names in the namespace, leaving out those already
// given (many allows several NAME arguments).
func (g *globals) completeSubscriptions(many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if (!many && len(args) > 0) || g.allNamespaces {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(g.listNames(cmd, &hookv1.WebhookSubscriptionList{}, true), toComplete, args), cobra.ShellCompDirectiveNoFileComp
	}
}

// listNames are the names of the objects of list's kind in the cluster (in the namespace when
// namespaced); nil when they cannot be listed.
func (g *globals) listNames(cmd *cobra.Command, list client.ObjectList, namespaced bool) []string {
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	c, err := g.cluster()
	if err != nil {
		return nil
	}
	var opts []client.ListOption
	if namespaced {
		opts = append(opts, client.InNamespace(c.namespace))
	}
	if err := c.client.List(ctx, list, opts...); err != nil {
		return nil
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if a, err := meta.Accessor(o); err == nil {
			names = append(names, a.GetName())
		}
	}
	return names
}

// withPrefix are the names that start with prefix and are not given, sorted.
func withPrefix(names []string, prefix string, given []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !slices.Contains(given, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (g *globals) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	cfg, err := g.kube.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(cfg.Contexts))
	for name := range cfg.Contexts {
		names = append(names, name)
	}
	return withPrefix(names, toComplete, nil), cobra.ShellCompDirectiveNoFileComp
}

// completeProfiles completes import's --profile with the built-in REST profiles.
func completeProfiles(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return profiles.Names(), cobra.ShellCompDirectiveNoFileComp
}
