// Package account reaches a provider account as a library: credentials and scope resolved into
// a provider client, the per-account cache with its lock, pacing (the limiter), backoff and
// eviction, the recovery operations and the account's shared look at missed events, the
// provider request metrics.
//
// Moved here from controllers/: accounts.go (cache, lock, ops), credentials.go, limiter.go,
// recovery_ops.go and recovery_look.go (the runner's own HTTP hand-over stays in controllers),
// and the provider part of metrics.go (metrics_provider.go). Observe, the one list sync, the
// preview and import share (controllers.observeList and Reconciler.Observe), still lives in
// controllers with the signing-state and claims readers the preview needs. It may import
// client-go to read credential Secrets and settings ConfigMaps; it never imports controllers.
package account
