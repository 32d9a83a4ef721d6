{{/* <release>-<name> (the release name alone when it holds the name), or fullnameOverride. */}}
{{- define "hookwarden.fullname" -}}
{{- $name := .Values.nameOverride | default .Chart.Name -}}
{{- if .Values.fullnameOverride -}}{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains $name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{/* Every object's labels: commonLabels, then ours (which win). */}}
{{- define "hookwarden.labels" -}}
{{- $ours := dict "app.kubernetes.io/part-of" "hookwarden" "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/managed-by" .Release.Service "app.kubernetes.io/version" .Chart.AppVersion "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version) -}}
{{- toYaml (merge $ours (.Values.commonLabels | default dict)) -}}
{{- end -}}

{{/* A component's probe: the chart's, with the user's fields (manager.livenessProbe, ...) over it. */}}
{{- define "hookwarden.probe" -}}
{{- toYaml (mergeOverwrite (deepCopy .default) (.user | default dict)) -}}
{{- end -}}

{{/* A component's topologySpreadConstraints: the user's list (a constraint without a
     labelSelector selects the component's pods), else the chart's over nodes (and zones). */}}
{{- define "hookwarden.spread" -}}
{{- $sel := fromYaml .selector -}}
{{- $out := list -}}
{{- range .user -}}
{{- $out = append $out (merge (deepCopy .) (dict "labelSelector" (dict "matchLabels" $sel))) -}}
{{- end -}}
{{- if not .user -}}
{{- range .keys -}}
{{- $out = append $out (dict "maxSkew" 1 "topologyKey" . "whenUnsatisfiable" "ScheduleAnyway" "labelSelector" (dict "matchLabels" $sel)) -}}
{{- end -}}
{{- end -}}
{{- with $out }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* A PodDisruptionBudget's budget: maxUnavailable when set, else minAvailable. */}}
{{- define "hookwarden.pdbBudget" -}}
{{- if not (kindIs "invalid" .maxUnavailable) -}}maxUnavailable: {{ .maxUnavailable }}{{- else -}}minAvailable: {{ .minAvailable }}{{- end -}}
{{- end -}}

{{- define "hookwarden.managerSelector" -}}
app.kubernetes.io/name: hookwarden-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hookwarden.receiverSelector" -}}
app.kubernetes.io/name: hookwarden-receiver
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hookwarden.managerSA" -}}{{ .Values.manager.serviceAccount.name | default (printf "%s-manager" (include "hookwarden.fullname" .)) }}{{- end -}}
{{- define "hookwarden.receiverSA" -}}{{ .Values.receiver.serviceAccount.name | default (printf "%s-receiver" (include "hookwarden.fullname" .)) }}{{- end -}}

{{/* The image of component c (manager, receiver): repository or <registry>/<c>, then @digest or
     :tag (default appVersion, the version make images tags). */}}
{{- define "hookwarden.image" -}}
{{- $i := index .root.Values.image .c -}}
{{- $repo := $i.repository -}}
{{- if not $repo -}}
{{- /* An umbrella chart's global.imageRegistry (a mirror for every subchart) wins over ours. */ -}}
{{- $registry := (.root.Values.global | default dict).imageRegistry | default .root.Values.image.registry -}}
{{- if not $registry -}}
{{- fail (printf "image.registry is empty: set it to where you pushed the images (make images-push REGISTRY=<registry>, see docs/install.md, Images), e.g. --set image.registry=ghcr.io/you; or set image.%s.repository" .c) -}}
{{- end -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) .c -}}
{{- end -}}
{{- if $i.digest -}}{{ $repo }}@{{ $i.digest }}{{- else -}}{{ $repo }}:{{ $i.tag | default .root.Chart.AppVersion }}{{- end -}}
{{- end -}}

{{/* imagePullSecrets and an umbrella chart's global.imagePullSecrets (names or {name: ...}),
     each once, as a pod spec's list; empty when there are none. */}}
{{- define "hookwarden.pullSecrets" -}}
{{- $names := list -}}
{{- range concat (.Values.imagePullSecrets | default list) ((.Values.global | default dict).imagePullSecrets | default list) -}}
{{- $n := . -}}
{{- if kindIs "map" . }}{{ $n = .name }}{{ end -}}
{{- if and $n (not (has $n $names)) }}{{ $names = append $names $n }}{{ end -}}
{{- end -}}
{{- range $names }}
- name: {{ . }}
{{- end -}}
{{- end -}}

{{- define "hookwarden.metricsPort" -}}{{ if .Values.metrics.secure }}8443{{ else }}9090{{ end }}{{- end -}}
{{- define "hookwarden.metricsScheme" -}}{{ if .Values.metrics.secure }}https{{ else }}http{{ end }}{{- end -}}

{{/* NetworkPolicy TCP ports, each once (values files give float64, --set int64: compared as ints). */}}
{{- define "hookwarden.tcpPorts" -}}
{{- $seen := list -}}
{{- range . -}}
{{- if not (has (int .) $seen) }}
- {protocol: TCP, port: {{ int . }}}
{{- $seen = append $seen (int .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Refuses values that cannot work, at render time, with a message. */}}
{{- define "hookwarden.validate" -}}
{{- $r := .Values.receiver -}}
{{- if $r.enabled -}}
{{- if not (has $r.store.type (list "sqlite" "postgres" "redis")) -}}
{{- fail (printf "receiver.store.type must be sqlite, postgres or redis, not %q" $r.store.type) -}}
{{- end -}}
{{- if and (eq $r.store.type "sqlite") (gt (int $r.replicas) 1) -}}
{{- fail (printf "receiver.replicas=%d with receiver.store.type=sqlite: the embedded store has one writer on one volume; use receiver.store.type=postgres for several replicas" (int $r.replicas)) -}}
{{- end -}}
{{- if and (eq $r.store.type "postgres") (not $r.store.postgres.dsnSecret.name) -}}
{{- fail "receiver.store.type=postgres needs receiver.store.postgres.dsnSecret.name: a Secret holding the DSN (key receiver.store.postgres.dsnSecret.key, default dsn)" -}}
{{- end -}}
{{- if eq $r.store.type "redis" -}}
{{- if not $r.store.redis.dsnSecret.name -}}
{{- fail "receiver.store.type=redis needs receiver.store.redis.dsnSecret.name: a Secret holding the DSN, redis://host:6379/0 or rediss://... (key receiver.store.redis.dsnSecret.key, default dsn)" -}}
{{- end -}}
{{- if not (has $r.store.redis.promise (list "strict" "at-least-once" "best-effort")) -}}
{{- fail (printf "receiver.store.redis.promise must be strict, at-least-once or best-effort, not %q" $r.store.redis.promise) -}}
{{- end -}}
{{- if and $r.store.redis.passwordSecret.name (not $r.store.redis.passwordSecret.key) -}}
{{- fail "receiver.store.redis.passwordSecret.key must name the key of the password in its Secret" -}}
{{- end -}}
{{- if not $r.store.redis.ports -}}
{{- fail "receiver.store.redis.ports must list the ports the receiver reaches Redis on (its NetworkPolicy opens only those)" -}}
{{- end -}}
{{- end -}}
{{- if lt (int $r.replicas) 1 -}}
{{- fail "receiver.replicas must be at least 1 (set receiver.enabled=false to run no receiver)" -}}
{{- end -}}
{{- end -}}
{{- if lt (int .Values.manager.replicas) 1 -}}
{{- fail "manager.replicas must be at least 1" -}}
{{- end -}}
{{- if and (not .Values.manager.serviceAccount.create) (not .Values.manager.serviceAccount.name) -}}
{{- fail "manager.serviceAccount.create=false needs manager.serviceAccount.name: the existing ServiceAccount to run as" -}}
{{- end -}}
{{- if and .Values.receiver.enabled (not .Values.receiver.serviceAccount.create) (not .Values.receiver.serviceAccount.name) -}}
{{- fail "receiver.serviceAccount.create=false needs receiver.serviceAccount.name: the existing ServiceAccount to run as" -}}
{{- end -}}
{{- if and .Values.receiver.enabled (eq .Values.receiver.store.type "sqlite") (eq ((.Values.receiver.strategy | default dict).type | default "") "RollingUpdate") -}}
{{- fail "receiver.strategy.type=RollingUpdate with receiver.store.type=sqlite: a new pod would open the database while the old one writes it; SQLite needs Recreate (the default)" -}}
{{- end -}}
{{- /* Against a cluster (kube-system is found; helm template finds nothing), every watched
       namespace must exist: its Roles go there, and a manager without them could not start. */ -}}
{{- if lookup "v1" "Namespace" "" "kube-system" -}}
{{- range .Values.watchNamespaces -}}
{{- if not (lookup "v1" "Namespace" "" .) -}}
{{- fail (printf "watchNamespaces: namespace %q does not exist. Create it first (kubectl create namespace %s), then install or upgrade: the manager's and the receiver's Roles go there, and without them the manager could not start" . .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if has "kube-system" .Values.watchNamespaces -}}
{{- fail "watchNamespaces must not include kube-system: Hookwarden needs no access to Secrets there" -}}
{{- end -}}
{{- end -}}
