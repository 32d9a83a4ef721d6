package github

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/hookwarden/hookwarden/providers"
)

// Provider is GitHub as the manager and the receiver register it: repository and organization
// hooks, named by spec.provider.github.
func Provider() providers.Provider {
	return providers.Provider{Factory: Factory(), CredentialKey: "token", Scope: Scope, Verifier: NewVerifier()}
}

// GitHub's rules for names, which the CRD's patterns state too: logins are alphanumerics and
// inner hyphens (at most 39); a repository owner may also be an Enterprise Managed User, whose
// login carries an _shortcode suffix; repository names are alphanumerics, '.', '_' and '-' (at
// most 100).
var (
	loginName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,37}[A-Za-z0-9])?$`)
	ownerName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,37}[A-Za-z0-9])?(_[A-Za-z0-9]{1,24})?$`)
	repoName  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	eventName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

func validLogin(s string) bool { return loginName.MatchString(s) }

func validOwner(s string) bool { return ownerName.MatchString(s) }

func validRepository(s string) bool {
	return len(s) <= 100 && repoName.MatchString(s) && s != "." && s != ".."
}

// target is spec.provider.github.
type target struct {
	Owner        string `json:"owner,omitempty"`
	Repository   string `json:"repository,omitempty"`
	Organization string `json:"organization,omitempty"`
	App          *struct {
		AppID string `json:"appID"`
	} `json:"app,omitempty"`
}

// AppCredentialKey is the key of the credentials Secret that holds a GitHub App's private key
// when spec.provider.credentialsRef.key is empty.
const AppCredentialKey = "privateKey"

// Scope reads spec.provider.github ({owner, repository}: a repository hook; {organization}: an
// organization hook; {app: {appID}}: a GitHub App's webhook) and the events, with GitHub's rules
// for names, and returns the target ("repos/<owner>/<repository>" or "orgs/<organization>",
// lower case: GitHub's paths are case-insensitive, so two spellings are one account;
// "app/<App ID or client ID>", as given: a client ID is case-sensitive).
func Scope(block []byte, events []string) (providers.Scope, error) {
	var g *target
	if len(block) > 0 {
		if err := json.Unmarshal(block, &g); err != nil {
			return providers.Scope{}, fmt.Errorf("spec.provider.github: %v", err)
		}
	}
	if g == nil {
		return providers.Scope{}, errors.New("spec.provider.github must be set when spec.provider.type is github, and only then")
	}
	if kinds := count(g.Owner != "" || g.Repository != "", g.Organization != "", g.App != nil); kinds != 1 {
		return providers.Scope{}, errors.New("spec.provider.github: set either owner and repository (a repository hook), organization (an organization hook) or app (a GitHub App's webhook)")
	}
	if (g.Owner != "") != (g.Repository != "") {
		return providers.Scope{}, errors.New("spec.provider.github: owner and repository are set together")
	}
	if o := g.Owner; o != "" && !validOwner(o) {
		return providers.Scope{}, fmt.Errorf("spec.provider.github.owner %q is not a GitHub login (letters, digits and inner hyphens, at most 39; an Enterprise Managed User's with its _shortcode)", o)
	}
	if o := g.Organization; o != "" && !validLogin(o) {
		return providers.Scope{}, fmt.Errorf("spec.provider.github.organization %q is not a GitHub organization name (letters, digits and inner hyphens, at most 39)", o)
	}
	if r := g.Repository; r != "" && !validRepository(r) {
		return providers.Scope{}, fmt.Errorf("spec.provider.github.repository %q is not a GitHub repository name (letters, digits, '.', '_' and '-', at most 100; not . or ..)", r)
	}
	if g.App != nil && !appID.MatchString(g.App.AppID) {
		return providers.Scope{}, fmt.Errorf("spec.provider.github.app.appID %q is neither a GitHub App ID (digits) nor a client ID (Iv…)", g.App.AppID)
	}
	for _, e := range events {
		if e != "*" && !eventName.MatchString(e) {
			return providers.Scope{}, fmt.Errorf("spec.events: %q is not a GitHub event name (lowercase with underscores, such as push or pull_request, or '*' for all)", e)
		}
	}
	if g.App != nil {
		return providers.Scope{Target: "app/" + g.App.AppID, CredentialKey: AppCredentialKey}, nil
	}
	if g.Organization != "" {
		return providers.Scope{Target: "orgs/" + strings.ToLower(g.Organization)}, nil
	}
	return providers.Scope{Target: "repos/" + strings.ToLower(g.Owner) + "/" + strings.ToLower(g.Repository)}, nil
}

// count is how many of bs are true.
func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
