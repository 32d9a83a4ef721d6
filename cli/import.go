package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/hookwarden/hookwarden/account"
	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
	"github.com/hookwarden/hookwarden/decide"
	"github.com/hookwarden/hookwarden/internal/matching"
	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest/profiles"
)

type importFlags struct {
	provider      string
	credentials   string
	credentialKey string
	apiURL        string
	owner, repo   string
	org           string
	app           string
	stripeAPI     string
	stripePayload string
	profile       string
	restParams    map[string]string
	secrets       []string
	namePrefix    string
	clusterName   string
}

func newImportCommand(g *globals) *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "import --provider stripe|github|rest --credentials SECRET [target flags]",
		Short: "Write WebhookSubscription manifests that adopt the registrations an account already has",
		Long: `import lists the registrations of a Stripe account, a GitHub repository, organization or App, or
a REST profile's target (read-only, through the same client the manager uses, with the credential
in the Secret --credentials names in the namespace) and writes one WebhookSubscription per
canonical URL to stdout (YAML documents; -o json: a v1 List): its URL, its events as a set, its
description, policies.adoption Adopt. What it did with each registration goes to stderr, with
every field adopting it changes at the provider (as the manager's plan of the manifest says:
GitHub content_type form -> json, a Stripe ownership marker).
Applied, each adopts its registration without a create, except where the provider cannot give
its secret back (below). Twins (registrations for one canonical URL) make one manifest, for the
one whose secret you supplied (else the oldest, as the manager would pick); the others are
reported: where the provider stores an ownership marker the manager prunes them, elsewhere it
leaves them alone (and, with no secret supplied, adopts none of them and waits with Conflict).

What adopting means for the signing secret, per provider (also printed per registration on stderr):
  stripe  Stripe shows a secret only in the create response: the manager adopts by rotation (a new
          endpoint, make-before-break, then the old one is deleted), unless you supply the secret
          with --secret ID=FILE (from the dashboard), which writes a signing Secret before the
          subscription: then nothing is created (a subscription that reaches the manager before
          its Secret waits for it up to 30s).
          A v2 event destination (--stripe-api-version v2, with --stripe-event-payload) is adopted
          the same way; a v1 endpoint and a v2 destination on one URL are different registrations,
          each imported only by the import of its own kind.
  github  GitHub masks the secret: a new secret is set on the same hook (no new hook), unless you
          supply it with --secret ID=FILE.
  rest    as the profile's secret mode says (readable or fetched: read back; client-chosen: set anew).

A registration carrying another cluster's ownership marker is refused (it is that cluster's). One
a subscription of this cluster answers for is skipped, naming it: by any proof the manager uses
(this cluster's marker, a recorded id, a held secret, a bundled-receiver URL), or because a
subscription on the account serves its URL (a twin: that subscription prunes or reports it).
So import lists the subscriptions of every namespace and reads the signing Secrets of those on
the account.`,
		Example: `  hookwarden import --provider stripe --credentials stripe-api -n shop > stripe.yaml
  hookwarden import --provider stripe --credentials stripe-api --secret we_123=whsec.txt > stripe.yaml
  hookwarden import --provider stripe --stripe-api-version v2 --credentials stripe-api > stripe-v2.yaml
  hookwarden import --provider github --credentials github-api --owner acme --repository shop > github.yaml
  hookwarden import --provider rest --profile gitlab-project-hooks --parameter project=acme/shop --credentials gitlab-token > gitlab.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return g.runImport(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.provider, "provider", "", "provider type: stripe, github or rest")
	fl.StringVar(&f.credentials, "credentials", "", "name of the Secret (in the namespace) holding the provider credential; the manifests reference it")
	fl.StringVar(&f.credentialKey, "credentials-key", "", "key in that Secret (default: the provider's, apiKey or token; privateKey with --app)")
	fl.StringVar(&f.apiURL, "api-url", "", "provider API base URL (default: the provider's public API)")
	fl.StringVar(&f.owner, "owner", "", "GitHub: repository owner")
	fl.StringVar(&f.repo, "repository", "", "GitHub: repository name")
	fl.StringVar(&f.org, "organization", "", "GitHub: organization (organization hooks)")
	fl.StringVar(&f.stripeAPI, "stripe-api-version", "", "Stripe: v1 (webhook endpoints, the default) or v2 (event destinations); the manifests carry it in spec.provider.stripe")
	fl.StringVar(&f.stripePayload, "stripe-event-payload", "", "Stripe v2: the destinations' event payload, thin (the default) or snapshot; destinations of the other payload are skipped")
	fl.StringVar(&f.app, "app", "", "GitHub: App ID or client ID (the App's webhook; the credential is the App's private key, key privateKey)")
	fl.StringVar(&f.profile, "profile", "", "REST: the built-in profile ("+strings.Join(profiles.Names(), ", ")+"); the manifests name it in spec.provider.rest.builtin")
	fl.StringToStringVar(&f.restParams, "parameter", nil, "REST: profile parameters (NAME=VALUE, repeatable)")
	fl.StringArrayVar(&f.secrets, "secret", nil, "ID=FILE: the signing secret of registration ID, read from FILE (Stripe: adopt without rotation); repeatable")
	fl.StringVar(&f.namePrefix, "name-prefix", "", "prefix of the subscriptions' names (default: the provider type, or the REST profile's name)")
	fl.StringVar(&f.clusterName, "cluster-name", "", "the manager's --cluster-name (default: as the manager's, the UID of kube-system)")
	_ = cmd.RegisterFlagCompletionFunc("profile", completeProfiles)
	_ = cmd.RegisterFlagCompletionFunc("provider", fixedCompletion("stripe", "github", "rest"))
	_ = cmd.RegisterFlagCompletionFunc("stripe-api-version", fixedCompletion("v1", "v2"))
	_ = cmd.RegisterFlagCompletionFunc("stripe-event-payload", fixedCompletion("thin", "snapshot"))
	return cmd
}

// importNote is what import says about one registration.
type importNote struct {
	Registration string `json:"registration"`
	URL          string `json:"url"`
	Subscription string `json:"subscription,omitempty"`
	// Outcome: imported, twin (of one imported, not imported itself), refused or skipped.
	Outcome string `json:"outcome"`
	Secret  string `json:"secret"`
}

func (g *globals) runImport(cmd *cobra.Command, f importFlags) error {
	if f.provider == "" || f.credentials == "" {
		return usageError("--provider and --credentials are required")
	}
	secrets, err := readSecretFiles(f.secrets)
	if err != nil {
		return err
	}
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	c, err := g.cluster()
	if err != nil {
		return err
	}
	name, err := clusterName(ctx, c, f.clusterName)
	if err != nil {
		return err
	}
	tmpl, err := importTemplate(f, c.namespace)
	if err != nil {
		return err
	}
	r := account.NewObserver(readOnly{c.client}, account.NewAccounts(g.opts.Registry, account.AccountOptions{Now: g.opts.Now}), name, "")
	g.progress(cmd.ErrOrStderr(), "listing the %s account's registrations", f.provider)
	regs, caps, err := r.ObserveList(ctx, tmpl)
	if err != nil {
		return err
	}
	var all hookv1.WebhookSubscriptionList
	if err := c.client.List(ctx, &all); err != nil {
		return kubeError("listing the WebhookSubscriptions of every namespace (import skips the registrations they own)", err)
	}
	owned, err := g.ownedHere(ctx, c, r, tmpl, regs, all.Items)
	if err != nil {
		return err
	}
	notes, importable := sortOut(regs, caps, owned, name)
	prefix := f.namePrefix
	switch {
	case prefix != "":
	case f.profile != "":
		prefix = f.profile // a REST profile's name says more than "rest"
	default:
		prefix = f.provider
	}
	if ids := unusedSecrets(secrets, importable); len(ids) > 0 {
		return usageError("--secret %s: the account has no importable registration of that id", strings.Join(ids, ", "))
	}
	out := importAll(tmpl, importable, caps, secrets, prefix)
	notes = append(notes, out.notes...)
	// What adopting changes, as the manager's own plan of each manifest says (from the same
	// list, with the signing Secrets written beside them).
	r.API = readOnly{newWithSecrets(c.client, out.signing)}
	changes := map[string][]string{}
	for _, sub := range out.imported {
		// The plans of the manifests see what the cluster's subscriptions record.
		p, err := r.Preview(ctx, sub, regs, all.Items)
		if err != nil {
			return err
		}
		changes[key(sub)] = adoptionChanges(p)
	}
	for i, n := range notes {
		if c := changes[n.Subscription]; n.Outcome == "imported" && len(c) > 0 {
			notes[i].Secret += "; adopting changes " + strings.Join(c, ", ")
		}
	}
	for _, n := range notes {
		if n.Subscription != "" && n.Outcome == "imported" {
			g.progress(cmd.ErrOrStderr(), "%s %s (%s) as %s: %s", n.Outcome, n.Registration, n.URL, n.Subscription, n.Secret)
		} else {
			g.progress(cmd.ErrOrStderr(), "%s %s (%s): %s", n.Outcome, n.Registration, n.URL, n.Secret)
		}
	}
	return writeManifests(cmd.OutOrStdout(), g.output, out.objs)
}

// readSecretFiles reads --secret ID=FILE flags: each registration's secret, by id.
func readSecretFiles(flags []string) (map[string][]byte, error) {
	secrets := map[string][]byte{}
	for _, s := range flags {
		id, file, ok := strings.Cut(s, "=")
		if !ok || id == "" || file == "" {
			return nil, usageError("--secret %q: want ID=FILE", s)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usageError("--secret %s: %v", id, err)
		}
		secrets[id] = []byte(strings.TrimSpace(string(b)))
	}
	return secrets, nil
}

// importTemplate is the subscription every imported one starts from: the account the flags
// name, in namespace.
func importTemplate(f importFlags, namespace string) (*hookv1.WebhookSubscription, error) {
	tmpl := &hookv1.WebhookSubscription{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}, Spec: hookv1.WebhookSubscriptionSpec{
		Provider: hookv1.ProviderSpec{Type: hookv1.ProviderType(f.provider), CredentialsRef: hookv1.SecretKeySelector{Name: f.credentials, Key: f.credentialKey}, APIURL: f.apiURL},
		Events:   []string{"*"},
	}}
	if tmpl.Spec.Provider.Type != hookv1.ProviderStripe && (f.stripeAPI != "" || f.stripePayload != "") {
		return nil, usageError("--stripe-api-version and --stripe-event-payload are for --provider stripe")
	}
	switch tmpl.Spec.Provider.Type {
	case hookv1.ProviderStripe:
		switch {
		case f.stripeAPI == string(hookv1.StripeV2):
			tmpl.Spec.Provider.Stripe = &hookv1.StripeProvider{APIVersion: hookv1.StripeV2, EventPayload: hookv1.StripeEventPayload(f.stripePayload)}
		case f.stripeAPI != "" && f.stripeAPI != string(hookv1.StripeV1):
			return nil, usageError("--stripe-api-version %q: want v1 or v2", f.stripeAPI)
		case f.stripePayload != "":
			return nil, usageError("--stripe-event-payload is for --stripe-api-version v2 (v1 endpoints send snapshot events)")
		}
	case hookv1.ProviderGitHub:
		tmpl.Spec.Provider.GitHub = &hookv1.GitHubTarget{Owner: f.owner, Repository: f.repo, Organization: f.org}
		if f.app != "" {
			tmpl.Spec.Provider.GitHub.App = &hookv1.GitHubApp{AppID: f.app}
		}
	case hookv1.ProviderREST:
		if _, ok := profiles.Get(f.profile); !ok {
			return nil, usageError("--profile %q: want a built-in profile: %s", f.profile, strings.Join(profiles.Names(), ", "))
		}
		tmpl.Spec.Provider.REST = &hookv1.RESTProvider{Builtin: f.profile, Parameters: f.restParams}
	default:
		return nil, usageError("--provider %q: want stripe, github or rest", f.provider)
	}
	return tmpl, nil
}

// sortOut says, of regs, which import refuses or skips (notes) and which it may import: not a
// registration the provider's client cannot read, one of another kind than the client manages
// (caps.Variant: a Stripe v1 endpoint in a v2 list, a destination of the other payload),
// another cluster's (its marker), or one a subscription of this cluster (name) owns or serves.
func sortOut(regs []providers.Registration, caps providers.Capabilities, owned map[string]account.Owned, name string) (notes []importNote, importable []providers.Registration) {
	for _, reg := range regs {
		note := importNote{Registration: reg.ID, URL: reg.URL}
		switch {
		case reg.Unfit != "":
			note.Outcome, note.Secret = "skipped", "the provider's object does not fit its client ("+reg.Unfit+")"
		case reg.Variant != caps.Variant:
			note.Outcome = "skipped"
			note.Secret = fmt.Sprintf("a %s registration, another kind than this import's %s ones (never a twin of them, even on the same URL): import it with the flags that select %s", variantName(reg.Variant), variantName(caps.Variant), variantName(reg.Variant))
		case !reg.Owner.IsZero() && reg.Owner.Cluster != name:
			note.Outcome, note.Secret = "refused", fmt.Sprintf("carries the ownership marker of cluster %q (%s/%s): it is that cluster's", reg.Owner.Cluster, reg.Owner.Namespace, reg.Owner.Name)
		case owned[reg.ID].Twin:
			o := owned[reg.ID]
			note.Outcome, note.Subscription = "skipped", o.Subscription
			note.Secret = fmt.Sprintf("a twin of the registration of %s in this cluster (%s): that subscription prunes or reports it", o.Subscription, o.Proof)
		case owned[reg.ID].Subscription != "":
			o := owned[reg.ID]
			note.Outcome, note.Subscription = "skipped", o.Subscription
			note.Secret = fmt.Sprintf("already owned by %s in this cluster (%s)", o.Subscription, o.Proof)
		default:
			importable = append(importable, reg)
			continue
		}
		notes = append(notes, note)
	}
	return notes, importable
}

// imports is what import writes: the manifests (objs: each signing Secret before its
// subscription), the subscriptions among them, the signing Secrets, what it says of each
// registration, and the --secret ids no importable registration took.
type imports struct {
	objs     []any
	imported []*hookv1.WebhookSubscription
	signing  []corev1.Secret
	notes    []importNote
}

// importAll makes one subscription per canonical URL of importable (from tmpl, named from
// prefix), for the twin whose secret was supplied (secrets), else the one the manager would keep.
func importAll(tmpl *hookv1.WebhookSubscription, importable []providers.Registration, caps providers.Capabilities, secrets map[string][]byte, prefix string) imports {
	var out imports
	used := map[string]bool{}
	for _, twins := range byCanonicalURL(importable) {
		held := map[string]bool{}
		for _, t := range twins {
			held[t.ID] = secrets[t.ID] != nil
		}
		reg := decide.Keeper(twins, held)
		sub := importedSubscription(tmpl, reg, uniqueName(prefix, reg.ID, used))
		note := importNote{Registration: reg.ID, URL: reg.URL, Subscription: key(sub), Outcome: "imported", Secret: secretNote(caps, reg.ID, held[reg.ID])}
		if held[reg.ID] {
			// The Secret first: applied in this order, it is there when the manager first
			// looks (which waits for it a short time anyway: the manager's ImportedSecretWait).
			sub.Annotations[hookv1.AnnotationImportedSecret] = sub.Spec.SigningSecret.Name
			sec := importedSigningSecret(sub, reg.ID, secrets[reg.ID])
			out.objs = append(out.objs, sec)
			out.signing = append(out.signing, *sec)
		}
		out.objs = append(out.objs, sub)
		out.imported = append(out.imported, sub)
		out.notes = append(out.notes, note)
		for _, t := range twins {
			if t.ID != reg.ID {
				out.notes = append(out.notes, twinNote(caps, t, reg, sub, len(twins), held))
			}
		}
	}
	return out
}

// unusedSecrets is the ids of --secret flags that name no importable registration, sorted.
func unusedSecrets(secrets map[string][]byte, importable []providers.Registration) []string {
	var ids []string
	for id := range secrets {
		if !slices.ContainsFunc(importable, func(r providers.Registration) bool { return r.ID == id }) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// manifest is obj as one writes a manifest: no status, no empty blocks (recovery: {}), no
// creationTimestamp: null.
func manifest(obj any) any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return obj
	}
	delete(m, "status")
	pruneEmpty(m)
	return m
}

// pruneEmpty removes, recursively, the nulls and empty objects of m.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			pruneEmpty(sub)
			if len(sub) == 0 {
				delete(m, k)
			}
		} else if v == nil {
			delete(m, k)
		}
	}
}

// writeManifests writes objects to w as manifests kubectl applies: YAML documents (the default,
// and -o yaml) or, with -o json, one v1 List.
func writeManifests(w io.Writer, output string, objs []any) error {
	if output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		items := make([]any, len(objs))
		for i, o := range objs {
			items[i] = manifest(o)
		}
		return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	docs := make([]string, 0, len(objs))
	for _, o := range objs {
		b, err := yaml.Marshal(manifest(o))
		if err != nil {
			return err
		}
		docs = append(docs, string(b))
	}
	_, err := fmt.Fprint(w, strings.Join(docs, "---\n"))
	return err
}

// ownedHere are the registrations of regs that a subscription of this cluster (all, every
// namespace's) owns or serves (account.Observer.Owners): the signing Secrets of those on the
// same account are read.
func (g *globals) ownedHere(ctx context.Context, c *cluster, r *account.Observer, tmpl *hookv1.WebhookSubscription, regs []providers.Registration, all []hookv1.WebhookSubscription) (map[string]account.Owned, error) {
	return r.Owners(tmpl, regs, all, func(sub *hookv1.WebhookSubscription) (map[string]bool, error) {
		var sec corev1.Secret
		err := c.client.Get(ctx, nsName(sub.Namespace, sub.Spec.SigningSecret.Name), &sec)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, kubeError("reading the signing Secret of "+key(sub)+" (import skips the registrations whose secret it holds)", err)
		}
		return account.HeldSecrets(&sec), nil
	})
}

func importedSubscription(tmpl *hookv1.WebhookSubscription, reg providers.Registration, name string) *hookv1.WebhookSubscription {
	events := slices.Clone(reg.Events)
	slices.Sort(events)
	events = slices.Compact(events)
	spec := *tmpl.Spec.DeepCopy()
	spec.Endpoint = hookv1.EndpointSpec{URL: reg.URL}
	spec.Events = events
	spec.Description = reg.Description
	spec.Disabled = reg.Disabled
	spec.SigningSecret = hookv1.SigningSecretSpec{Name: name + "-signing"}
	spec.Policies.Adoption = hookv1.AdoptionAdopt
	return &hookv1.WebhookSubscription{
		TypeMeta:   metav1.TypeMeta{APIVersion: hookv1.GroupVersion.String(), Kind: "WebhookSubscription"},
		ObjectMeta: metav1.ObjectMeta{Namespace: tmpl.Namespace, Name: name, Annotations: map[string]string{hookv1.AnnotationImportedFrom: reg.ID}},
		Spec:       spec,
	}
}

// importedSigningSecret is a signing Secret holding a secret the user supplied for reg, marked
// for the subscription that adopts it (the manager takes it as its own).
func importedSigningSecret(sub *hookv1.WebhookSubscription, id string, secret []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: sub.Namespace, Name: sub.Spec.SigningSecret.Name,
			Labels:      map[string]string{hookv1.LabelSigningSecret: "true", hookv1.LabelSubscription: sub.Name},
			Annotations: map[string]string{hookv1.AnnotationEndpointID: id, hookv1.AnnotationImportedFor: sub.Name}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{hookv1.SecretKeyFor(id): secret, hookv1.SecretKeyCurrent: secret},
	}
}

// adoptionChanges are the fields of a registration the plan of its manifest changes at the
// provider ("content_type: form -> json"): what adopting it does beyond what import's note on
// the secret says.
func adoptionChanges(p decide.Preview) []string {
	var out []string
	for _, st := range p.Steps {
		for _, ch := range st.Changes {
			out = append(out, changeLine(ch))
		}
	}
	return out
}

// byCanonicalURL groups registrations by canonical URL (the raw URL where it has none), in the
// order of each group's first registration: one manifest serves each group.
func byCanonicalURL(regs []providers.Registration) [][]providers.Registration {
	var groups [][]providers.Registration
	at := map[string]int{}
	for _, r := range regs {
		k, err := matching.Canonical(r.URL)
		if err != nil {
			k = r.URL
		}
		i, ok := at[k]
		if !ok {
			i = len(groups)
			at[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// twinNote says what happens to twin, a registration for the URL of keep, which sub adopts.
func twinNote(caps providers.Capabilities, twin, keep providers.Registration, sub *hookv1.WebhookSubscription, n int, held map[string]bool) importNote {
	note := importNote{Registration: twin.ID, URL: twin.URL, Subscription: key(sub), Outcome: "twin"}
	what := fmt.Sprintf("a twin of %s (the same canonical URL), not imported: %s keeps %s", keep.ID, key(sub), keep.ID)
	if held[twin.ID] {
		what += " (the secret you supplied for " + twin.ID + " is not used)"
	}
	switch {
	case caps.Markers:
		note.Secret = what + " and its manager prunes this one (policies.twins Prune; Keep to leave it)"
	case held[keep.ID]:
		note.Secret = what + "; this provider stores no ownership marker, so it cannot be proven the subscription's: the manager leaves it alone and reports it (delete it at the provider)"
	default:
		note.Secret = fmt.Sprintf("%s; this provider stores no ownership marker and none of the %d registrations for this URL is provably the subscription's, so the manager adopts none and waits with Conflict: delete the twins at the provider, or pass --secret %s=FILE", what, n, keep.ID)
	}
	return note
}

// variantName names a registration kind (providers.Registration.Variant) for a note: the
// provider's first kind is Stripe's v1 endpoint, the only provider with several.
func variantName(v string) string {
	if v == "" {
		return "v1"
	}
	return v
}

func secretNote(caps providers.Capabilities, id string, supplied bool) string {
	switch caps.Secret {
	case providers.SecretReturnedOnCreate:
		if supplied {
			return "adopted with the signing secret you supplied (a signing Secret is written): nothing is created"
		}
		return "the provider shows a secret only at create: adopting rotates (a new registration, make-before-break, then " + id + " is deleted); pass --secret " + id + "=FILE to keep it"
	case providers.SecretClientChosen:
		if supplied {
			return "adopted with the signing secret you supplied (a signing Secret is written): no new secret is set"
		}
		return "the provider masks its secret: a new secret is set on the same registration"
	case providers.SecretReadable, providers.SecretFetched:
		return "its secret is read back from the provider"
	case providers.SecretNone:
		return "deliveries are not signed"
	}
	return caps.Secret.String()
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// uniqueName makes a DNS-1123 name for a registration.
func uniqueName(prefix, id string, used map[string]bool) string {
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(prefix+"-"+id), "-"), "-")
	if len(base) > 200 {
		base = base[:200]
	}
	name := base
	for i := 2; used[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	used[name] = true
	return name
}
