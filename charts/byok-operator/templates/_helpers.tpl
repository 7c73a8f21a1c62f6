{{- define "byok.name" -}}byok-operator{{- end -}}
{{- define "byok.fullname" -}}{{ .Release.Name | trunc 40 | trimSuffix "-" }}-byok{{- end -}}
{{- define "byok.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
{{- define "byok.labels" -}}
app.kubernetes.io/name: {{ include "byok.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "byok.selector" -}}
app.kubernetes.io/name: {{ include "byok.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "byok.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
{{- define "byok.namespacesArg" -}}
{{- if .Values.watchNamespaces }}
- --namespaces={{ join "," .Values.watchNamespaces }}
{{- end }}
{{- end -}}
