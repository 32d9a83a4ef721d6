package routesecret

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	hookv1 "github.com/hookwarden/hookwarden/api/v1alpha1"
)

func TestName(t *testing.T) {
	long := strings.Repeat("a", 63)
	longName := strings.Repeat("b.", 126) + "c" // 253 characters, a valid subscription name
	cases := []struct {
		reason          string
		namespace, name string
	}{
		{"short names stay readable", "shop", "orders"},
		{"a name with dots", "shop", "orders.v2"},
		{"the longest namespace and name", long, longName},
		{"a cut that would end on a dot", long, strings.Repeat("x", 160) + "." + strings.Repeat("y", 80)},
		{"a cut that would end on a dash", long, strings.Repeat("x", 168) + "-" + strings.Repeat("y", 80)},
	}
	for _, c := range cases {
		n := Name(c.namespace, c.name)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("%s: Name(%q, %q) = %q is not a Secret name: %v", c.reason, c.namespace, c.name, n, errs)
		}
		if n != Name(c.namespace, c.name) {
			t.Errorf("%s: Name is not stable", c.reason)
		}
	}
	if got := Name("shop", "orders"); !strings.HasPrefix(got, "route.shop.orders.") {
		t.Errorf("Name(shop, orders) = %q, want it to start with route.shop.orders.", got)
	}
	// Pairs whose readable parts are equal or whose concatenations are: the hash tells them apart.
	seen := map[string]string{}
	for _, p := range [][2]string{
		{"a-b", "c"}, {"a", "b-c"}, {"a", "b.c"}, {"a.b", "c"},
		{long, longName}, {long, longName[:251] + "d"},
		{long, strings.Repeat("x", 250) + "1"}, {long, strings.Repeat("x", 250) + "2"},
	} {
		n := Name(p[0], p[1])
		if other, ok := seen[n]; ok {
			t.Errorf("%s/%s and %s share the route Secret %s", p[0], p[1], other, n)
		}
		seen[n] = p[0] + "/" + p[1]
	}
}

func TestFillAndSource(t *testing.T) {
	signing := map[string][]byte{
		hookv1.SecretKeyCurrent:           []byte("s1"),
		hookv1.SecretKeyPrefix + "we_1":   []byte("s1"),
		hookv1.SecretKeyPending:           []byte("p"),
		hookv1.SecretKeyVerifier:          []byte("{}"),
		"something-a-user-keeps-here":     []byte("not copied"),
		hookv1.SecretKeyPrefix + "hook_2": []byte("s2"),
	}
	src := Source{Namespace: "shop", Name: "orders", UID: "uid-1"}
	sec := New("hookwarden-system", src, signing)
	want := map[string][]byte{
		hookv1.SecretKeyCurrent: []byte("s1"), hookv1.SecretKeyPrefix + "we_1": []byte("s1"), hookv1.SecretKeyPending: []byte("p"),
		hookv1.SecretKeyVerifier: []byte("{}"), hookv1.SecretKeyPrefix + "hook_2": []byte("s2"),
	}
	if diff := cmp.Diff(want, sec.Data); diff != "" {
		t.Errorf("route Secret data (-want +got)\n%s", diff)
	}
	if sec.Namespace != "hookwarden-system" || sec.Name != Name("shop", "orders") {
		t.Errorf("route Secret %s/%s", sec.Namespace, sec.Name)
	}
	got, ok := SourceOf(sec)
	if !ok || got != src {
		t.Errorf("SourceOf = %+v, %v; want %+v", got, ok, src)
	}
	if sec.Labels[LabelName] != "orders" || sec.Labels[LabelNamespace] != "shop" {
		t.Errorf("labels %v", sec.Labels)
	}
	// A name too long for a label value is only in the annotation.
	longName := strings.Repeat("n", 100)
	sec = New("hookwarden-system", Source{Namespace: "shop", Name: longName}, nil)
	if _, ok := sec.Labels[LabelName]; ok {
		t.Errorf("a 100-character name in a label: %v", sec.Labels)
	}
	if got, ok := SourceOf(sec); !ok || got.Name != longName {
		t.Errorf("SourceOf a long name = %+v, %v", got, ok)
	}
	sec.Labels[Label] = "false"
	if _, ok := SourceOf(sec); ok {
		t.Error("SourceOf accepted a Secret without the route-secret label")
	}
}

// Data copies the secret of every registration, whichever form its key takes
// (hookv1.SecretKeyFor: a Bitbucket hook's "{uuid}" id is kept in hex), and nothing else.
func TestDataKeepsEveryRegistrationsSecret(t *testing.T) {
	signing := map[string][]byte{
		hookv1.SecretKeyCurrent:            []byte("s1"),
		hookv1.SecretKeyFor("we_1"):        []byte("s1"),
		hookv1.SecretKeyFor("{0f1e-2d3c}"): []byte("s2"),
		hookv1.SecretKeyPending:            []byte("s3"),
		"user-note":                        []byte("not signing material"),
	}
	got := Data(signing)
	delete(signing, "user-note")
	if diff := cmp.Diff(signing, got); diff != "" {
		t.Errorf("Data (-want +got):\n%s", diff)
	}
}
