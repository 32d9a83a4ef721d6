package stripe

import "github.com/hookwarden/hookwarden/providers"

// Metadata keys of the ownership marker. They are stored in Stripe accounts, so renaming one
// orphans every endpoint registered before the rename.
const (
	keyCluster   = "hookwarden_cluster"
	keyNamespace = "hookwarden_namespace"
	keyName      = "hookwarden_name"
	keyUID       = "hookwarden_uid"
	keyCreate    = "hookwarden_create_key"
)

// MarkerMetadata encodes the ownership marker as webhook endpoint metadata. Empty fields are left
// out, so the map is exactly what Stripe stores after a create.
func MarkerMetadata(o providers.Owner, createKey string) map[string]string {
	md := make(map[string]string, 5)
	for k, v := range map[string]string{
		keyCluster:   o.Cluster,
		keyNamespace: o.Namespace,
		keyName:      o.Name,
		keyUID:       o.UID,
		keyCreate:    createKey,
	} {
		if v != "" {
			md[k] = v
		}
	}
	return md
}

// OwnerFromMetadata decodes the ownership marker and the create idempotency key from webhook
// endpoint metadata. Keys that are not ours are ignored; an unmarked endpoint yields a zero Owner.
func OwnerFromMetadata(md map[string]string) (providers.Owner, string) {
	return providers.Owner{
		Cluster:   md[keyCluster],
		Namespace: md[keyNamespace],
		Name:      md[keyName],
		UID:       md[keyUID],
	}, md[keyCreate]
}

// ownerUpdateMetadata is the metadata sent on update: every owner key, empty ones as "" (which
// Stripe treats as "unset this key"), so the stored marker ends up equal to o. Stripe merges
// metadata on update, so hookwarden_create_key, which only the create knows, is kept by omission.
func ownerUpdateMetadata(o providers.Owner) map[string]string {
	return map[string]string{
		keyCluster:   o.Cluster,
		keyNamespace: o.Namespace,
		keyName:      o.Name,
		keyUID:       o.UID,
	}
}
