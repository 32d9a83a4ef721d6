// Package account reaches a provider account as a library: credentials and scope resolved into
// a provider client, the per-account cache with its lock, pacing (the limiter), backoff and
// eviction, the recovery operations and the account's shared look at missed events, the
// provider request metrics, and the one Observe that the manager, `hookwarden plan` and
// `hookwarden import` all call.
//
// What moves here from controllers/: accounts.go (cache, lock, ops), credentials.go,
// limiter.go, recovery_ops.go and recovery_look.go (minus the runner's own HTTP hand-over), the
// provider part of metrics.go, and Observe (today Reconciler.Observe and the prologue of
// Reconciler.preview, a copy of sync's). It may import client-go to read credential Secrets and
// settings ConfigMaps; it never imports controllers.
package account
