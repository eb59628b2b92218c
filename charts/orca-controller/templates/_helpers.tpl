{{/* The name in app.kubernetes.io/name, the Pods' selector: `orca-controller`, the kustomize
     base's, unless nameOverride says otherwise. */}}
{{- define "orca.name" -}}
{{- .Values.nameOverride | default "orca-controller" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Every object's name: fullnameOverride, else the name (fixed by default, so both installs
     agree and the operator's flags' defaults hold). */}}
{{- define "orca.fullname" -}}
{{- .Values.fullnameOverride | default (include "orca.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of the kustomize base, and Helm's own (ignored by the chart-vs-kustomize test). */}}
{{- define "orca.labels" -}}
app.kubernetes.io/name: {{ include "orca.name" . }}
app.kubernetes.io/part-of: orca-controller
{{ include "orca.helmLabels" . }}
{{- end -}}

{{/* Helm's labels alone (the dashboard ConfigMap, which kustomize's generator labels only
     for Grafana's sidecar). */}}
{{- define "orca.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "orca.selector" -}}
app.kubernetes.io/name: {{ include "orca.name" . }}
{{- end -}}

{{- define "orca.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The operator's ServiceAccount: serviceAccount.name, else the full name when the chart
     creates it, else the namespace's `default`. */}}
{{- define "orca.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "orca.fullname" .) }}
{{- else -}}
{{ .Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}

{{/* Names the operator's flags and the objects share. */}}
{{- define "orca.webhookService" -}}
{{- $full := include "orca.fullname" . -}}
{{- if eq $full "orca-controller" }}orca-webhook{{ else }}{{ $full }}-webhook{{ end -}}
{{- end -}}
{{- define "orca.tlsSecret" -}}{{ include "orca.fullname" . }}-tls{{- end -}}
{{- define "orca.certManagerSecret" -}}{{ include "orca.fullname" . }}-cert-manager-tls{{- end -}}
{{/* The Secret holding the CA clients verify the serving certificate with (ca.crt). */}}
{{- define "orca.caSecret" -}}
{{- if .Values.certManager.enabled }}{{ include "orca.certManagerSecret" . }}{{ else }}{{ include "orca.tlsSecret" . }}{{ end -}}
{{- end -}}
{{/* The ServiceMonitor's own ServiceAccount, and its token Secret. */}}
{{- define "orca.scraper" -}}{{ include "orca.fullname" . }}-metrics-scraper{{- end -}}

{{/* The replicas prefer different Nodes (affinity's default, when the value is empty). */}}
{{- define "orca.defaultAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "orca.selector" . | nindent 12 }}
{{- end -}}

{{/* `orca run`'s flags, in the kustomize base's order (manifests/manager/deployment.yaml;
     manifests/cert-manager drops --webhook-service and swaps --tls-secret for --tls-cert-dir
     in place). */}}
{{- define "orca.args" -}}
- run
- --log-format=json
- --liveness=none
- --metrics-port=9090
{{- if .Values.webhook.enabled }}
- --webhook-port=9443
{{- if not .Values.certManager.enabled }}
- --webhook-service=$(POD_NAMESPACE)/{{ include "orca.webhookService" . }}
{{- if ne (include "orca.fullname" .) "orca-controller" }}
- --webhook-configuration={{ include "orca.fullname" . }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.certManager.enabled }}
- --tls-cert-dir=/etc/orca/tls
{{- else }}
- --tls-secret=$(POD_NAMESPACE)/{{ include "orca.tlsSecret" . }}
{{- end }}
- --tls-san={{ include "orca.fullname" . }}.$(POD_NAMESPACE).svc
{{- range .Values.watchNamespaces }}
- --namespace={{ . }}
{{- end }}
{{- if not .Values.leaderElection.enabled }}
- --no-leader-elect
{{- else if ne .Values.leaderElection.leaseName "orca-controller" }}
- --lease-name={{ .Values.leaderElection.leaseName }}
{{- end }}
{{- if not (has .Values.nodeLifecycle (list "auto" "taints" "ready")) }}
{{- fail (printf "nodeLifecycle: %v is not one of auto, taints, ready" .Values.nodeLifecycle) }}
{{- end }}
{{- if ne .Values.nodeLifecycle "auto" }}
- --node-lifecycle={{ .Values.nodeLifecycle }}
{{- end }}
{{- if not .Values.metrics.perNode }}
- --no-node-metrics
{{- end }}
{{- if ne .Values.resilience.key "topology.kubernetes.io/zone" }}
- --resilience-key={{ .Values.resilience.key }}
{{- end }}
{{- if ne (toString .Values.resilience.interval) "60s" }}
- --resilience-interval={{ .Values.resilience.interval }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}
