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
{{- /* Health and delivery reporting (gateway.statusToken): on whenever the gateway is, with a generated token unless
       gateway.statusToken.secret names a Secret of one's own. */ -}}
{{- define "byok.statusTokenEnabled" -}}
{{- if and .Values.gateway.enabled .Values.gateway.statusToken.enabled }}true{{ end -}}
{{- end -}}
{{- define "byok.statusTokenSecret" -}}
{{- .Values.gateway.statusToken.secret | default (printf "%s-gateway-status-token" (include "byok.fullname" .)) -}}
{{- end -}}
{{- /* The generated token, base64: the one in the release's Secret when it exists (stable across upgrades), else a
       new random one. Memoized in .Values so every template of one render sees the same token. lookup answers
       nothing under `helm template` and client-side --dry-run: each such render makes a new token, so GitOps tools
       that render with `helm template` should name a Secret of their own (docs/operator.md). */ -}}
{{- define "byok.generatedStatusToken" -}}
{{- $st := .Values.gateway.statusToken }}
{{- if not (hasKey $st "generatedToken") }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "byok.statusTokenSecret" .) }}
{{- $token := "" }}
{{- if and $existing $existing.data (hasKey $existing.data $st.key) }}
{{- $token = index $existing.data $st.key }}
{{- else }}
{{- $token = randAlphaNum 48 | b64enc }}
{{- end }}
{{- $_ := set $st "generatedToken" $token }}
{{- end }}
{{- $st.generatedToken -}}
{{- end -}}
{{- /* Pod annotation that rolls the operator and the gateways together when the generated token changes: both read it
       once at start. */ -}}
{{- define "byok.statusTokenChecksum" -}}
{{- if and (include "byok.statusTokenEnabled" .) (not .Values.gateway.statusToken.secret) }}
checksum/status-token: {{ include "byok.generatedStatusToken" . | sha256sum | trunc 16 }}
{{- end }}
{{- end -}}
{{/*
The kube-apiserver's addresses as a JSON list of CIDRs: networkPolicy.kubeApiServerCidrs, else the `kubernetes`
EndpointSlice's addresses as looked up at install (empty under helm template, where lookup sees no cluster).
*/}}
{{- define "byok.kubeApiServerCidrs" -}}
{{- $cidrs := list -}}
{{- if .Values.networkPolicy.kubeApiServerCidrs -}}
{{- $cidrs = .Values.networkPolicy.kubeApiServerCidrs -}}
{{- else -}}
{{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" -}}
{{- range ($slice.endpoints | default list) -}}
{{- range .addresses -}}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toJson $cidrs -}}
{{- end -}}
{{/*
An egress rule to the spend ledger's Redis port (from ledger.redisUrl; 6379 when it names none), to any address:
the URL's host may be a Service, a managed Redis or an IP. Nothing when there is no Redis.
*/}}
{{- define "byok.redisEgress" -}}
{{- with .Values.ledger.redisUrl }}
{{- $port := regexFind ":[0-9]+" (regexReplaceAll "^[a-z]+://([^@/]*@)?" . "") | trimPrefix ":" | default "6379" }}
# The spend ledger's Redis (ledger.redisUrl).
- ports:
    - { port: {{ $port }}, protocol: TCP }
{{- end }}
{{- end -}}
{{- /* The delivery stream is on: the gateway and its stream both enabled (and the operator that serves it). */ -}}
{{- define "byok.deliveryStreamEnabled" -}}
{{- if and .Values.gateway.enabled .Values.gateway.deliveryStream.enabled .Values.operator.enabled }}true{{ end -}}
{{- end -}}
