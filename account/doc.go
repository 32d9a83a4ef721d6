// Package account reaches a provider account as a library: credentials and scope resolved into
// a provider client, the per-account cache with its lock, pacing (the limiter), backoff and
// eviction, the recovery operations and the account's shared look at missed events, the
// provider request metrics.
//
// Moved here from controllers/: accounts.go (cache, lock, ops), credentials.go, limiter.go,
// recovery_ops.go and recovery_look.go (the runner's own HTTP hand-over stays in controllers),
// and the provider part of metrics.go (metrics_provider.go). The Observer (observe.go) is the one
// prologue the manager's reconcile and the command line's plan and import share: the spec
// checked, the account reached, the rotation request confirmed, the list read; preview.go plans
// a subscription as a reconcile would (its signing Secret read, the claims of the cluster's
// subscriptions) and says which registrations the cluster already owns; signing.go reads what a
// signing Secret holds. It may import client-go to read Secrets, ConfigMaps and subscriptions;
// it never imports controllers.
package account
