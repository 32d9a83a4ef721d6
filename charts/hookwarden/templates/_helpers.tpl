{{- define "hookwarden.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "hookwarden.labels" -}}
app.kubernetes.io/part-of: hookwarden
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "hookwarden.managerSelector" -}}
app.kubernetes.io/name: hookwarden-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hookwarden.receiverSelector" -}}
app.kubernetes.io/name: hookwarden-receiver
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hookwarden.managerSA" -}}{{ include "hookwarden.fullname" . }}-manager{{- end -}}
{{- define "hookwarden.receiverSA" -}}{{ include "hookwarden.fullname" . }}-receiver{{- end -}}

{{- define "hookwarden.metricsPort" -}}{{ if .Values.metrics.secure }}8443{{ else }}9090{{ end }}{{- end -}}
{{- define "hookwarden.metricsScheme" -}}{{ if .Values.metrics.secure }}https{{ else }}http{{ end }}{{- end -}}

{{/* Refuses values that cannot work, at render time, with a message. */}}
{{- define "hookwarden.validate" -}}
{{- $r := .Values.receiver -}}
{{- if $r.enabled -}}
{{- if not (has $r.store.type (list "sqlite" "postgres")) -}}
{{- fail (printf "receiver.store.type must be sqlite or postgres, not %q" $r.store.type) -}}
{{- end -}}
{{- if and (eq $r.store.type "sqlite") (gt (int $r.replicas) 1) -}}
{{- fail (printf "receiver.replicas=%d with receiver.store.type=sqlite: the embedded store has one writer on one volume; use receiver.store.type=postgres for several replicas" (int $r.replicas)) -}}
{{- end -}}
{{- if and (eq $r.store.type "postgres") (not $r.store.postgres.dsnSecret.name) -}}
{{- fail "receiver.store.type=postgres needs receiver.store.postgres.dsnSecret.name: a Secret holding the DSN (key receiver.store.postgres.dsnSecret.key, default dsn)" -}}
{{- end -}}
{{- if lt (int $r.replicas) 1 -}}
{{- fail "receiver.replicas must be at least 1 (set receiver.enabled=false to run no receiver)" -}}
{{- end -}}
{{- end -}}
{{- if lt (int .Values.manager.replicas) 1 -}}
{{- fail "manager.replicas must be at least 1" -}}
{{- end -}}
{{- if has "kube-system" .Values.watchNamespaces -}}
{{- fail "watchNamespaces must not include kube-system: Hookwarden needs no access to Secrets there" -}}
{{- end -}}
{{- end -}}
