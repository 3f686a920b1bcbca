{{/* Chart name, overridable. */}}
{{- define "fabriccap.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object name: the release name when it already contains the chart name. */}}
{{- define "fabriccap.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "fabriccap.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fabriccap.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fabriccap.labels" -}}
{{ include "fabriccap.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "fabriccap.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fabriccap.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Refuses a config that enables no fabric (the operator would exit 2 on it at start).
Mirrors operator/fabriccap/core/config.py: without `fabrics` the built-in efa profile is on;
`enabled` defaults to true.
*/}}
{{- define "fabriccap.checkFabrics" -}}
{{- $fabrics := list (dict "name" "efa") -}}
{{- if hasKey .Values.config "fabrics" -}}
{{- $fabrics = .Values.config.fabrics -}}
{{- end -}}
{{- $enabled := 0 -}}
{{- range $fabrics -}}
{{- if or (not (hasKey . "enabled")) .enabled -}}
{{- $enabled = add1 $enabled -}}
{{- end -}}
{{- end -}}
{{- if eq $enabled 0 -}}
{{- fail "config.fabrics: no enabled fabric profile; the operator would have nothing to watch" -}}
{{- end -}}
{{- end -}}

{{/*
The operator's config file: the config value, with transport.enabled set from the chart's
transport.enabled (one switch for the RBAC and the operator, so neither runs without the other).
*/}}
{{- define "fabriccap.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- if .Values.transport.enabled -}}
{{- $transport := deepCopy (default (dict) $config.transport) -}}
{{- $_ := set $transport "enabled" true -}}
{{- $_ := set $config "transport" $transport -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
Refuses config.transport.enabled without the chart's transport.enabled: the operator would read
logs it may not read (403 on every pod), while the switch that grants get on pods/log is off.
*/}}
{{- define "fabriccap.checkTransport" -}}
{{- if and (not .Values.transport.enabled) .Values.config.transport -}}
{{- if .Values.config.transport.enabled -}}
{{- fail "config.transport.enabled: set transport.enabled instead; it also grants get on pods/log" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The image reference: repository:tag, and @digest when one is given (the digest decides). */}}
{{- define "fabriccap.image" -}}
{{- $reference := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest -}}
{{- $reference = printf "%s@%s" $reference .Values.image.digest -}}
{{- end -}}
{{- $reference -}}
{{- end -}}

{{/*
The scrape job of the operator: the ServiceMonitor takes it from the Service's
app.kubernetes.io/name label (fabriccap.name), unless prometheusRule.job names another one.
The alert rules select it; FabricCapabilityOperatorDown would fire forever on another name.
*/}}
{{- define "fabriccap.jobName" -}}
{{- .Values.prometheusRule.job | default (include "fabriccap.name" .) -}}
{{- end -}}

{{/* A probe of /healthz on the health port, from a probe value without its `enabled`. */}}
{{- define "fabriccap.probe" -}}
httpGet:
  path: /healthz
  port: health
{{ omit . "enabled" | toYaml }}
{{- end -}}
