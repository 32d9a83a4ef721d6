// Package charts holds the Helm chart (hookwarden/) and the tests that check it against a real
// API server: helm lint, helm template applied with server-side dry run, the RBAC each
// ServiceAccount ends up with, both binaries running as those ServiceAccounts, and the alerts
// and dashboard against the metrics the binaries serve.
package charts
