// Package decide holds the pure decisions of the manager and the command line: it imports only
// api, providers and internal/matching (no client-go, no controller-runtime, no net/http), so a
// Decision is a function of plain values, its table tests compile without envtest, and the
// manager, `hookwarden plan` and `hookwarden import` share one decision.
//
// What lives here, by file (moved out of controllers/):
//   - validate.go: spec checks (CEL mirrored), the provider's scope, the bundled receiver's URL.
//   - ownership.go: how a registration is proven ours, and the relation of each observed one.
//   - plan.go, plan_steps.go: the registration plan of one round and its ordered steps; drift.
//   - keys.go: idempotency keys; urlkeys.go: an account's parsed URLs.
//   - outcome.go: stall and wait outcomes, provider errors classified into them.
//   - recovery_plan.go: whether a recovery run starts, from where, in which mode, and whether
//     it lists every event of the span the provider had the endpoint disabled.
//   - preview.go: the plan as the command line shows it, every round of it.
//
// What reaches a provider account lives in account/; what acts (watches, Reconcile, the
// executor, Secrets, status, the recovery runner) stays in controllers/.
package decide
