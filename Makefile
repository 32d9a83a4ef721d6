# Hookwarden. `make demo` runs the whole thing locally; `make test` runs every test.
# Nothing but Go is needed: the control plane (kube-apiserver, etcd, kubectl) and stripe-mock are
# built from the Go module proxy into $(CACHE) by scripts in hack/.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
export GOWORK := off

CACHE ?= $(or $(HOOKWARDEN_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/hookwarden)
export HOOKWARDEN_CACHE := $(CACHE)
# envtest waits 20 s by default for kube-apiserver and etcd to come up; a loaded 2-core machine
# (several control planes at once in make test) can take longer.
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 2m
BIN ?= $(CURDIR)/bin
IMG ?= hookwarden/manager:dev
RECEIVER_IMG ?= hookwarden/receiver:dev
CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen
KUSTOMIZE_VERSION ?= v5.7.1
HELM_VERSION ?= v3.22.0
GEN_PATHS := ./api/...;./controllers/...
TEST_TIMEOUT ?= 20m
# One version for the chart, the images and --version: the chart's appVersion, which its image
# tags default to. VERSION=0.3.0 overrides it; a leading v is dropped (v0.3.0 tags 0.3.0, as
# the chart expects).
CHART_APP_VERSION := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' charts/hookwarden/Chart.yaml)
VERSION ?= $(CHART_APP_VERSION)
override VERSION := $(shell echo '$(VERSION)' | sed 's/^v\([0-9]\)/\1/')
# The commit, linked into both binaries (--version) and labelled on the images: the same value,
# also where the build has no VCS stamp.
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# Static, reproducible binaries: no cgo (the images have no libc), no local paths, no build id.
GO_BUILD := CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -buildid= -X github.com/hookwarden/hookwarden/internal/version.version=$(VERSION) -X github.com/hookwarden/hookwarden/internal/version.revision=$(REVISION)"

.PHONY: all
all: build

##@ Development
.PHONY: manifests
manifests: ## Generate the CRD and RBAC from markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="$(GEN_PATHS)" output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: generate
generate: ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: verify-generated
verify-generated: ## Fail when generated files are stale.
	@hack/verify-generated.sh

.PHONY: verify-lean
verify-lean: ## Fail when git tracks a file over 1 MiB outside testdata/ (build outputs stay out).
	@hack/verify-lean.sh

.PHONY: verify-manifests
verify-manifests: kustomize ## Fail when a kustomize overlay does not build.
	@for d in config/crd config/rbac config/manager config/receiver config/samples config/samples/github config/samples/github-app config/default config/prometheus; do \
	  $(BIN)/kustomize build $$d >/dev/null || { echo "kustomize build $$d failed"; exit 1; }; done
	@echo "kustomize overlays build"

.PHONY: chart-sync
chart-sync: manifests ## Copy the generated CRD and manager rules into the Helm chart (make test fails when they differ).
	@rm -f charts/hookwarden/files/crds/*.yaml
	@cp config/crd/bases/*.yaml charts/hookwarden/files/crds/
	@cp config/rbac/role.yaml charts/hookwarden/files/manager-role.yaml

.PHONY: profiles-sync
profiles-sync: ## Copy the shipped REST profiles (config/samples/rest) into the binaries' built-in profiles (its test fails when they differ).
	@rm -f providers/rest/profiles/*.yaml
	@for f in config/samples/rest/*.profile.yaml; do cp "$$f" providers/rest/profiles/$$(basename "$$f" .profile.yaml).yaml; done

# As helm's own release build: the Kubernetes version `helm template` and `helm lint` assume
# without a cluster is its client-go's (v0.37 → 1.37), not the bare default 1.20, which the
# chart's kubeVersion (>= 1.30) refuses.
HELM_K8S_MINOR ?= 37
HELM_LDFLAGS := -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR)

.PHONY: helm
helm: ## Build helm $(HELM_VERSION) from the module proxy into bin/ (cached).
	@test -x $(BIN)/helm && test -f $(BIN)/.helm-$(HELM_VERSION)-k8s1.$(HELM_K8S_MINOR) || { echo "== installing helm $(HELM_VERSION)"; \
	  GOBIN=$(BIN) go install -ldflags "$(HELM_LDFLAGS)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && touch $(BIN)/.helm-$(HELM_VERSION)-k8s1.$(HELM_K8S_MINOR); }

.PHONY: promtool
promtool: ## Make sure promtool is installed (Debian's prometheus package; installed with apt-get when root).
	@hack/promtool.sh >/dev/null

.PHONY: control-plane
control-plane: ## Build kube-apiserver, etcd and kubectl from the module proxy (cached).
	@hack/control-plane.sh >/dev/null

.PHONY: stripe-mock
stripe-mock: ## Install stripe-mock v0.183.0 (cached).
	@hack/stripe-mock.sh >/dev/null

.PHONY: lint
lint: ## golangci-lint v2 (pinned in hack/golangci-lint.sh, built once into $(CACHE)): the usual checks, function length and the layering (.golangci.yml).
	@"$$(hack/golangci-lint.sh)" run ./...

# The fast tier: tests that start a control plane, PostgreSQL, Redis, NATS, stripe-mock or a
# built binary call testtier.RequiresServers, which skips them under -short (make test never
# passes it). Timed per package at the end; the full output is in bin/unit.log.
.PHONY: unit
unit: ## Run every test that needs no control plane, database server, broker or built binary (go test -short; about a minute warm).
	go test -short -count=1 -v ./... 2>&1 | TEST_LOG=bin/unit.log hack/test-summary.sh

.PHONY: test
test: lint verify-lean verify-generated verify-manifests vet control-plane stripe-mock helm promtool ## Run every test (unit, fuzz seeds, envtest, stripe-mock contract, SQLite, PostgreSQL, Redis and Redis Cluster; images, the release against a loopback registry, Helm chart, alerts; small bench-reconcile and chaos runs).
	@echo "== go test (envtest assets: $$(hack/control-plane.sh --print-dir))"
	HOOKWARDEN_TEST_POSTGRES="$${HOOKWARDEN_TEST_POSTGRES:-$$(hack/postgres.sh)}" \
	HELM=$(BIN)/helm KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print-dir)" go test -race -count=1 -timeout $(TEST_TIMEOUT) -v ./... 2>&1 | hack/test-summary.sh

BACKLOG ?= 1000000

.PHONY: bench-receiver-backlog
bench-receiver-backlog: ## The receiver on SQLite and PostgreSQL empty and holding BACKLOG (default 1,000,000) undelivered events, side by side; then the backlog drains into a paced sink (prints tables).
	go run ./hack/bench-receiver -backlog $(BACKLOG) -postgres "$${HOOKWARDEN_TEST_POSTGRES:-$$(hack/postgres.sh)}"

.PHONY: bench-receiver
bench-receiver: ## Measure the receiver's ack path (SQLite, PostgreSQL, a Redis of its own) against a no-op handler and each store's reference (prints a table); then its CPU per request with tracing off and on.
	go run ./hack/bench-receiver -postgres "$${HOOKWARDEN_TEST_POSTGRES:-$$(hack/postgres.sh)}"
	@echo "ack path CPU per request, tracing off vs on (100% sampled, local OTLP endpoint):"
	go test ./receiver/ -run '^$$' -bench AckPathTracing -benchtime 3000x -count=1

.PHONY: bench-sinks
bench-sinks: ## Each broker sink (NATS JetStream embedded, the machine's RabbitMQ, kfake) against a plain publish loop of its client library at the same concurrency and durability: ev/s ack→broker ack, CPU per event, ratios, met / not met (prints a table; ARGS=-events N -concurrency C -only nats,amqp,kafka).
	go run ./hack/bench-sinks $(ARGS)

.PHONY: bench-reconcile
bench-reconcile: control-plane ## Measure how the manager's cost grows: N subscriptions over M accounts against the rate-limited fake Stripe and GitHub (prints a table; ARGS=-full for the whole grid).
	@go build -o $(BIN)/manager ./cmd/manager
	go run ./hack/bench-reconcile -assets "$$(hack/control-plane.sh --print-dir)" -manager $(BIN)/manager $(ARGS)

CHAOS_TIMEOUT ?= 15m
CHAOS_DURATION ?= 3m
CHAOS_SEED ?=

# The manager half is TestChaos in cmd/manager, a row for the fake Stripe and one for the fake
# GitHub (-chaos.full: 200 subscriptions over 8 Stripe accounts, 100 over 4 GitHub repositories;
# 24 over 3 each in make test); the receiver half is TestChaos in cmd/receiver. CHAOS_SEED=N
# repeats a run's choices in both.
.PHONY: chaos
chaos: control-plane ## Chaos, loopback only: two leader-elected managers SIGKILLed through a create storm and a deletion under 20 % provider faults (0 duplicates, 0 orphans, 0 foreign touched), then chaos-receiver; prints REPORT blocks.
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print-dir)" go test ./cmd/manager -run '^TestChaos$$' -count=1 -v -timeout $(CHAOS_TIMEOUT) \
	  -args -chaos.full $(if $(CHAOS_SEED),-chaos.seed=$(CHAOS_SEED))
	$(MAKE) chaos-receiver

.PHONY: chaos-receiver
chaos-receiver: control-plane ## Three receiver replicas on a private PostgreSQL, SIGKILLed and restarted under load, PostgreSQL restarted once, for CHAOS_DURATION (default 3m; make test runs 25s); prints REPORT receiver-chaos.
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh --print-dir)" go test ./cmd/receiver -run '^TestChaos$$' -count=1 -v -timeout 15m \
	  -args -chaos.duration=$(CHAOS_DURATION) $(if $(CHAOS_SEED),-chaos.seed=$(CHAOS_SEED))

FUZZ_TARGETS := ./internal/matching:FuzzCanonical ./internal/matching:FuzzSameEvents \
	./providers/stripe:FuzzStripeHeader ./providers/github:FuzzGitHubHeader ./providers:FuzzLinks \
	./providers/standardwebhooks:FuzzStandardWebhooksHeader ./providers/rest:FuzzRESTHeader ./providers/rest:FuzzParseProfile \
	./internal/jsonscan:FuzzTopLevelStrings ./receiver:FuzzHostileDeliveries

# Fuzz targets whose coverage differs from run to run: FuzzHostileDeliveries drives whole
# receivers (HTTP, both databases, delivery workers), so nearly every input looks new. Their
# cached corpus is dropped before each run (it would only grow, and is replayed at every start)
# and new inputs are not minimized (each would cost a minute); failing inputs still land in
# testdata/fuzz.
FUZZ_NOISY := FuzzHostileDeliveries

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s); their seed corpora also run in make test.
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; extra=""; \
	  case " $(FUZZ_NOISY) " in *" $$fn "*) extra="-fuzzminimizetime 0"; \
	    rm -rf "$$(go env GOCACHE)/fuzz/$$(go list $$pkg)/$$fn";; esac; \
	  echo "== $$fn ($$pkg) for $${FUZZTIME:-30s}"; \
	  go test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $${FUZZTIME:-30s} $$extra || exit 1; done

PROFILE ?=

.PHONY: validate-profile
validate-profile: ## Check a REST provider profile (PROFILE=path) before anything is sent; prints each problem with its field path.
	@test -n "$(PROFILE)" || { echo "usage: make validate-profile PROFILE=path/to/profile.yaml"; exit 2; }
	@go run ./cmd/manager validate-profile $(PROFILE)

##@ Build
.PHONY: build
build: cli ## Build static binaries into bin/ (CGO_ENABLED=0, version from VERSION).
	$(GO_BUILD) -o $(BIN)/manager ./cmd/manager
	$(GO_BUILD) -o $(BIN)/receiver ./cmd/receiver
	$(GO_BUILD) -o $(BIN)/fakestripe ./cmd/fakestripe
	$(GO_BUILD) -o $(BIN)/fakegithub ./cmd/fakegithub

.PHONY: cli
cli: ## Build the command line: bin/hookwarden and the kubectl plugin bin/kubectl-hookwarden (the same binary; put either on PATH).
	$(GO_BUILD) -o $(BIN)/hookwarden ./cmd/hookwarden
	cp $(BIN)/hookwarden $(BIN)/kubectl-hookwarden

# Images: built here without a container engine (hack/image, go-containerregistry) from the
# static binaries, cross-built for every platform in PLATFORMS: an OCI image index per image
# (bin/images/oci, an OCI layout; or pushed with REGISTRY), and a docker-save tarball of this
# machine's platform for docker load / kind load.
PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_REPO ?= hookwarden
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_BIN := $(BIN)/images
comma := ,
empty :=
space := $(empty) $(empty)
IMAGE_ARGS = -version $(VERSION) -revision "$(REVISION)" -platforms $(subst $(space),$(comma),$(strip $(PLATFORMS))) \
	-source-date-epoch $(SOURCE_DATE_EPOCH) -binaries $(IMAGE_BIN) manager receiver

.PHONY: version
version: ## Print the version make build, make images and the chart use.
	@echo $(VERSION)

.PHONY: image-binaries
image-binaries: ## Cross-build the manager and receiver for PLATFORMS into bin/images/<os>-<arch>/ (CGO_ENABLED=0).
	@for p in $(PLATFORMS); do os=$${p%%/*}; arch=$${p##*/}; \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o $(IMAGE_BIN)/$$os-$$arch/manager ./cmd/manager && \
	  GOOS=$$os GOARCH=$$arch $(GO_BUILD) -o $(IMAGE_BIN)/$$os-$$arch/receiver ./cmd/receiver || exit 1; done

.PHONY: images
images: image-binaries ## Build the images for PLATFORMS: bin/images/oci (OCI layout, one index per image) and bin/images/{manager,receiver}.tar (this platform; docker load -i / kind load image-archive).
	go run ./hack/image -repository $(IMAGE_REPO) -out $(BIN)/images $(IMAGE_ARGS)

.PHONY: images-push
images-push: image-binaries ## Push <REGISTRY>/{manager,receiver}:<VERSION>, each an OCI index for PLATFORMS (e.g. make images-push REGISTRY=ghcr.io/me), credentials from ~/.docker/config.json.
	@test -n "$(REGISTRY)" || { echo "set REGISTRY, e.g. make images-push REGISTRY=ghcr.io/me"; exit 1; }
	go run ./hack/image -push $(REGISTRY) $(IMAGE_ARGS)

# A release, from one command: the images for PLATFORMS pushed to REGISTRY (an OCI index each),
# a CycloneDX SBOM of each attached to its index as an OCI referrer, cosign signatures of each
# index and image made with SIGNING_KEY (cosign's key format; its password in COSIGN_PASSWORD),
# and the chart as oci://REGISTRY/charts/hookwarden:VERSION, signed too. The same inputs give
# the same digests. SBOMs, the packaged chart and release.txt also go to RELEASE_OUT.
SIGNING_KEY ?=
RELEASE_OUT ?= $(BIN)/release
RELEASE = @test -n "$(REGISTRY)" -a -n "$(SIGNING_KEY)" || { echo "set REGISTRY and SIGNING_KEY, e.g. make release VERSION=0.2.0 REGISTRY=ghcr.io/me SIGNING_KEY=cosign.key (go run ./hack/release generate-key cosign makes a key pair)"; exit 1; }; \
	go run ./hack/release -registry $(REGISTRY) -key $(SIGNING_KEY) -out $(RELEASE_OUT) -chart charts/hookwarden $(IMAGE_ARGS)

.PHONY: release
release: image-binaries ## Publish a release: signed multi-arch images with SBOM referrers and the chart as an OCI artifact (VERSION, REGISTRY, SIGNING_KEY; COSIGN_PASSWORD).
	$(RELEASE)

.PHONY: release-publish
release-publish: ## make release without cross-building the binaries again (from bin/images).
	$(RELEASE)

RECEIVER_BASE_URL ?=

.PHONY: run
run: manifests ## Run the manager against the cluster in KUBECONFIG (leader election off).
	go run ./cmd/manager --leader-elect=false --metrics-bind-address=:8080 --health-probe-bind-address=:8081 --receiver-base-url="$(RECEIVER_BASE_URL)"

##@ Deployment
.PHONY: kustomize
kustomize:
	@test -x $(BIN)/kustomize || { echo "== installing kustomize $(KUSTOMIZE_VERSION)"; GOBIN=$(BIN) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION); }

KUBECTL ?= kubectl

.PHONY: install
install: manifests kustomize ## Install the CRD into the cluster in KUBECONFIG.
	$(BIN)/kustomize build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests kustomize ## Remove the CRD.
	$(BIN)/kustomize build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests kustomize ## Deploy the manager (image IMG) and the receiver (RECEIVER_IMG) with kustomize.
	cd config/manager && $(BIN)/kustomize edit set image controller=$(IMG)
	cd config/receiver && $(BIN)/kustomize edit set image receiver=$(RECEIVER_IMG)
	$(BIN)/kustomize build config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: kustomize ## Remove the deployment.
	$(BIN)/kustomize build config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Demo
.PHONY: demo
demo: ## Run Hookwarden end to end on a local control plane, the fake Stripe, the fake GitHub and an embedded NATS JetStream.
	@echo "== building the local control plane (first run: several minutes, then cached)"
	@hack/control-plane.sh >/dev/null
	@echo "== building manager, receiver, fakestripe, fakegithub and demo"
	@go build -o $(BIN)/manager ./cmd/manager
	@go build -o $(BIN)/receiver ./cmd/receiver
	@go build -o $(BIN)/fakestripe ./cmd/fakestripe
	@go build -o $(BIN)/fakegithub ./cmd/fakegithub
	@go build -o $(BIN)/demo ./hack/demo
	@$(BIN)/demo -assets "$$(hack/control-plane.sh --print-dir)" -bin $(BIN) -samples config/samples,config/samples/github

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
