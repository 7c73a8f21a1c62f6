{{- define "byok.name" -}}{{ .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- /* The prefix of every object's name: fullnameOverride; else the release name when it already holds the stem (byok,
       or nameOverride), so `helm install byok` makes byok-gateway, not byok-byok-gateway; else <release>-byok.
       45 characters at most: the longest suffix a Service gets (-aggregated-api) must still fit a DNS label (63). */ -}}
{{- define "byok.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- $stem := .Values.nameOverride | default "byok" -}}
{{- if contains $stem .Release.Name -}}
{{- .Release.Name | trunc 45 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" (.Release.Name | trunc 40 | trimSuffix "-") $stem | trunc 45 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}
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
checksum/status-token: {{ include "byok.generatedStatusToken" . | sha256sum | trunc 16 | quote }}
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
{{- define "byok.redisPort" -}}
{{- regexFind ":[0-9]+" (regexReplaceAll "^[a-z]+://([^@/]*@)?" .Values.ledger.redisUrl "") | trimPrefix ":" | default "6379" }}
{{- end -}}
{{- define "byok.redisEgress" -}}
{{- if .Values.ledger.redisUrl }}
# The spend ledger's Redis (ledger.redisUrl).
- ports:
    - { port: {{ include "byok.redisPort" . }}, protocol: TCP }
{{- end }}
{{- end -}}
{{- /* The delivery stream is on: the gateway and its stream both enabled (and the operator that serves it). */ -}}
{{- define "byok.deliveryStreamEnabled" -}}
{{- if and .Values.gateway.enabled .Values.gateway.deliveryStream.enabled .Values.operator.enabled }}true{{ end -}}
{{- end -}}
{{- /* A tenant-facing Service's http port (api.service, gateway.service): nodePort only where the type has node ports. */ -}}
{{- define "byok.httpServicePort" -}}
{{- $svc := index . 0 -}}
{{- if and $svc.nodePort (eq $svc.type "ClusterIP") -}}
{{- fail (printf "%s.service.nodePort needs %s.service.type NodePort or LoadBalancer, not ClusterIP" (index . 1) (index . 1)) -}}
{{- end -}}
- { name: http, port: {{ $svc.port }}, targetPort: http{{ with $svc.nodePort }}, nodePort: {{ . }}{{ end }} }
{{- end -}}
{{- /* The in-cluster base URL of a Service of this release: http://<name>.<namespace>.svc[:port]. */ -}}
{{- define "byok.serviceUrl" -}}
{{- $ := index . 0 -}}
{{- $port := int (index . 2) -}}
http://{{ include "byok.fullname" $ }}-{{ index . 1 }}.{{ $.Release.Namespace }}.svc{{ if ne $port 80 }}:{{ $port }}{{ end }}
{{- end -}}
{{- /* The Service and port an Ingress or HTTPRoute path goes to (service: gateway | api) as JSON, or {} when that
       component is off. Only the gateway's tenant port: its ops port stays inside the cluster. */ -}}
{{- define "byok.routedBackend" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
{{- if and (eq $component "gateway") $.Values.gateway.enabled -}}
{{- dict "name" (printf "%s-gateway" (include "byok.fullname" $)) "port" (int $.Values.gateway.service.port) | toJson -}}
{{- else if and (eq $component "api") $.Values.api.enabled -}}
{{- dict "name" (printf "%s-api" (include "byok.fullname" $)) "port" (int $.Values.api.service.port) | toJson -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}
{{- /* What NOTES print for an Ingress or HTTPRoute path: the gateway's chat completions when it has the whole host
       (path /), else the path itself. */ -}}
{{- define "byok.externalUrl" -}}
{{- $base := index . 0 -}}{{- $path := index . 1 -}}{{- $component := index . 2 -}}
{{- if eq $component "gateway" -}}
gateway:  {{ $base }}{{ if eq $path "/" }}/v1/chat/completions{{ else }}{{ $path }}{{ end }}
{{- else -}}
REST API: {{ $base }}{{ $path }}
{{- end -}}
{{- end -}}
