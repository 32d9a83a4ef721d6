package rest_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hookwarden/hookwarden/providers"
	"github.com/hookwarden/hookwarden/providers/rest"
	"github.com/hookwarden/hookwarden/providers/rest/profiles"
)

func TestScope(t *testing.T) {
	gitlab, _ := profiles.Get("gitlab-project-hooks")
	cases := []struct {
		name, reason string
		block        string
		want         providers.Scope
		wantErr      string
	}{
		{name: "builtin", reason: "a built-in profile is the settings, read from the binary",
			block: `{"builtin":"gitlab-project-hooks","parameters":{"project":"acme/shop"}}`,
			want:  providers.Scope{Target: rest.Target(map[string]string{"project": "acme/shop"}), Settings: gitlab}},
		{name: "inline", reason: "an inline profile is the settings as written",
			block: `{"profile":"kind: Profile"}`, want: providers.Scope{Target: rest.Target(nil), Settings: []byte("kind: Profile")}},
		{name: "profileRef", reason: "the manager reads the ConfigMap key",
			block: `{"profileRef":{"name":"p","key":"k"}}`,
			want:  providers.Scope{Target: rest.Target(nil), SettingsRef: &providers.ConfigMapKey{Name: "p", Key: "k", Field: "spec.provider.rest.profileRef"}}},
		{name: "unknown builtin", reason: "a name no binary ships stalls with the list of those it does",
			block: `{"builtin":"gitlab"}`, wantErr: `spec.provider.rest.builtin: no built-in profile "gitlab" (built in: bitbucket-repository-hooks, `},
		{name: "builtin and inline", reason: "one profile only, as the CRD's rule says",
			block: `{"builtin":"gitlab-project-hooks","profile":"kind: Profile"}`, wantErr: "spec.provider.rest: set exactly one of builtin, profileRef or profile"},
		{name: "none", reason: "no profile at all",
			block: `{"parameters":{"project":"1"}}`, wantErr: "spec.provider.rest: set exactly one of builtin, profileRef or profile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rest.Scope([]byte(tc.block), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("%s: error %v, want %q...", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
