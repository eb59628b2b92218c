{{/* The name every object shares with the kustomize base: fixed, so both installs agree. */}}
{{- define "orca.name" -}}orca-controller{{- end -}}

{{/* Labels of the kustomize base, and Helm's own (ignored by the chart-vs-kustomize test). */}}
{{- define "orca.labels" -}}
app.kubernetes.io/name: {{ include "orca.name" . }}
app.kubernetes.io/part-of: {{ include "orca.name" . }}
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

{{/* Names the operator's flags and the objects share. */}}
{{- define "orca.webhookService" -}}orca-webhook{{- end -}}
{{- define "orca.tlsSecret" -}}{{ include "orca.name" . }}-tls{{- end -}}
{{- define "orca.certManagerSecret" -}}{{ include "orca.name" . }}-cert-manager-tls{{- end -}}

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
{{- end }}
{{- end }}
{{- if .Values.certManager.enabled }}
- --tls-cert-dir=/etc/orca/tls
{{- else }}
- --tls-secret=$(POD_NAMESPACE)/{{ include "orca.tlsSecret" . }}
{{- end }}
- --tls-san={{ include "orca.name" . }}.$(POD_NAMESPACE).svc
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
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}
