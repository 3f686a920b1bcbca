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
The device-plugin namespaces of the enabled fabric profiles, as a JSON list: the operator
watches pods and DaemonSets there (and only there), so the chart grants read access there.
Mirrors operator/fabriccap/core/config.py: without `fabrics` only the built-in efa profile is on;
an entry named like a built-in profile is merged onto it key by key, so it keeps the built-in
devicePlugin.namespace unless it gives one; other profiles default to kube-system; `enabled`
defaults to true.
tests/unit/test_packaging.py checks this against the operator's own reading of the config.
*/}}
{{- define "fabriccap.pluginNamespaces" -}}
{{- $builtin := dict "efa" "kube-system" "aks-rdma" "network-operator" -}}
{{- $fabrics := list (dict "name" "efa") -}}
{{- if hasKey .Values.config "fabrics" -}}
{{- $fabrics = .Values.config.fabrics -}}
{{- end -}}
{{- $namespaces := list -}}
{{- range $fabrics -}}
{{- $enabled := true -}}
{{- if hasKey . "enabled" -}}
{{- $enabled = .enabled -}}
{{- end -}}
{{- if $enabled -}}
{{- $namespace := get $builtin (toString .name) | default "kube-system" -}}
{{- with .devicePlugin -}}
{{- with .namespace -}}
{{- $namespace = . -}}
{{- end -}}
{{- end -}}
{{- $namespaces = append $namespaces $namespace -}}
{{- end -}}
{{- end -}}
{{- if not $namespaces -}}
{{- fail "config.fabrics: no enabled fabric profile; the operator would have nothing to watch" -}}
{{- end -}}
{{- $namespaces | uniq | sortAlpha | toJson -}}
{{- end -}}
