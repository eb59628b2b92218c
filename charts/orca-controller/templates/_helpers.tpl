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

{{- define "orca.args" -}}
- run
- --log-format=json
{{- range .Values.watchNamespaces }}
- --namespace={{ . }}
{{- end }}
{{- if not .Values.leaderElection.enabled }}
- --no-leader-elect
{{- else if ne .Values.leaderElection.leaseName "orca-controller" }}
- --lease-name={{ .Values.leaderElection.leaseName }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}
