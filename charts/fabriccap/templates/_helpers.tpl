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
Refuses a config that enables no fabric, or names one fabric twice (the operator would exit 2
on it at start). The fabrics as operator/fabriccap/core/config.py reads them
(`fabriccap.fabrics`, generated with the admission policy: without `fabrics`, the built-in
profiles); `enabled` defaults to true.
*/}}
{{- define "fabriccap.checkFabrics" -}}
{{- $fabrics := include "fabriccap.fabrics" . | fromJsonArray -}}
{{- $enabled := 0 -}}
{{- $names := dict -}}
{{- range $fabrics -}}
{{- if hasKey $names .name -}}
{{- fail (printf "config.fabrics: fabric names must be unique; %s is given twice" .name) -}}
{{- end -}}
{{- $_ := set $names .name true -}}
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
Refuses what the operator's TransportSettings and Config refuse beyond the schema: transport
without workload reporting, read steps not ascending, and a maxBytes quantity string out of
bounds (the integer form the schema bounds itself).
*/}}
{{- define "fabriccap.checkTransport" -}}
{{- $transport := .Values.config.transport | default (dict) -}}
{{- if and (not .Values.transport.enabled) $transport.enabled -}}
{{- fail "config.transport.enabled: set transport.enabled instead; it also grants get on pods/log" -}}
{{- end -}}
{{- $workloads := .Values.config.workloads | default (dict) -}}
{{- if and .Values.transport.enabled (hasKey $workloads "enabled") (not $workloads.enabled) -}}
{{- fail "transport.enabled needs config.workloads.enabled: the pods whose logs are read are workloads" -}}
{{- end -}}
{{- $previous := "" -}}
{{- range $transport.readAfterSeconds -}}
{{- if and (ne (toString $previous) "") (le (float64 .) (float64 $previous)) -}}
{{- fail (printf "config.transport.readAfterSeconds: read steps must be ascending, got %v" $transport.readAfterSeconds) -}}
{{- end -}}
{{- $previous = . -}}
{{- end -}}
{{- if kindIs "string" $transport.maxBytes -}}
{{- $bytes := include "fabriccap.quantityBytes" $transport.maxBytes | float64 -}}
{{- if or (lt $bytes 262144.0) (gt $bytes 67108864.0) -}}
{{- fail (printf "config.transport.maxBytes: %s is not between 256Ki and 64Mi" $transport.maxBytes) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A Kubernetes quantity string (the schema's QUANTITY_PATTERN: a decimal number, then a binary or
decimal suffix or an exponent) as a number, as operator/fabriccap/core/quantity.py reads it.
An exponent past 30 the operator refuses: it reads here as past any bound.
*/}}
{{- define "fabriccap.quantityBytes" -}}
{{- $text := trim . -}}
{{- $number := regexFind `^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)` $text -}}
{{- $suffix := trimPrefix $number $text -}}
{{- $factors := dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 "n" 0.000000001 "u" 0.000001 "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 -}}
{{- $value := float64 $number -}}
{{- if hasKey $factors $suffix -}}
{{- $value = mulf $value (get $factors $suffix) -}}
{{- else -}}
{{- $exponent := atoi (substr 1 (len $suffix) $suffix) -}}
{{- if gt $exponent 30 -}}
{{- $value = 1e30 -}}
{{- else if ge $exponent 0 -}}
{{- range until $exponent -}}{{- $value = mulf $value 10.0 -}}{{- end -}}
{{- else -}}
{{- range until (int (sub 0 $exponent)) -}}{{- $value = divf $value 10.0 -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $value -}}
{{- end -}}

{{/*
Refuses a second fabriccap in one namespace: the Lease's name is fixed (fabriccap-leader, or
fabriccap-leader-I-of-N), so both installs would elect one leader on one Lease and the other's
pools would never be published. Renaming the Lease per release would instead give a rolling
upgrade of an existing install two leaders, one per Lease, both writing. At install and upgrade
helm `lookup` lists the namespace's Deployments; under `helm template` it finds none.
*/}}
{{- define "fabriccap.checkOneInstallPerNamespace" -}}
{{- $found := lookup "apps/v1" "Deployment" .Release.Namespace "" | default (dict) -}}
{{- include "fabriccap.refuseOtherInstall" (dict "top" . "deployments" ($found.items | default (list))) -}}
{{- end -}}

{{/*
The rule of fabriccap.checkOneInstallPerNamespace over a list of Deployments: one of another
release (or a kustomize install) that runs fabriccap, found by the chart's label (helm.sh/chart
fabriccap-<version>) or the name label both installs carry, fails the render.
*/}}
{{- define "fabriccap.refuseOtherInstall" -}}
{{- $top := .top -}}
{{- range .deployments -}}
{{- $labels := .metadata.labels | default (dict) -}}
{{- $chart := get $labels "helm.sh/chart" -}}
{{- $ours := or (hasPrefix (printf "%s-" $top.Chart.Name) $chart) (eq (get $labels "app.kubernetes.io/name") $top.Chart.Name) -}}
{{- if and $ours (ne (get $labels "app.kubernetes.io/instance") $top.Release.Name) -}}
{{- fail (printf "namespace %s already runs fabriccap (Deployment %s of %s): two installs in one namespace share the leader Lease fabriccap-leader, so one of them would never publish; install this one in another namespace" $top.Release.Namespace .metadata.name (get $labels "app.kubernetes.io/instance" | default "another install")) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Refuses values that render objects the API server would refuse, or an operator that cannot run
as rendered: a release name that makes no Service name (a DNS-1035 label: a lowercase letter
first, no dot), one port for both servers (the second cannot listen), a --namespace in
extraArgs other than the release's (the Lease would be out of the Role's reach: nobody leads),
a `release` label given twice (prometheusRelease and additionalLabels.release), and a user's
label map that gives one of the chart's own labels again (the key would be rendered twice, and
a changed selector label would part a Deployment from its pods).
*/}}
{{- define "fabriccap.checkValues" -}}
{{- $fullname := include "fabriccap.fullname" . -}}
{{- if not (regexMatch `^[a-z]([-a-z0-9]*[a-z0-9])?$` $fullname) -}}
{{- fail (printf "release name %s: the objects' name %s is no DNS-1035 label (a lowercase letter first, then lowercase letters, digits and '-'); choose another release name or set fullnameOverride" .Release.Name $fullname) -}}
{{- end -}}
{{- if eq (int .Values.metrics.port) (int .Values.health.port) -}}
{{- fail (printf "metrics.port and health.port are both %v: /metrics and /healthz need a port each" .Values.metrics.port) -}}
{{- end -}}
{{- $args := .Values.extraArgs | default (list) -}}
{{- range $index, $arg := $args -}}
{{- $namespace := "" -}}
{{- if hasPrefix "--namespace=" $arg -}}
{{- $namespace = trimPrefix "--namespace=" $arg -}}
{{- else if and (eq $arg "--namespace") (lt (add1 $index) (len $args)) -}}
{{- $namespace = index $args (add1 $index) -}}
{{- end -}}
{{- if and $namespace (ne $namespace $.Release.Namespace) -}}
{{- fail (printf "extraArgs: --namespace %s is not the release namespace %s: the leader Lease would be where the chart's Role grants nothing, and no replica would lead; install the release in %s instead" $namespace $.Release.Namespace $namespace) -}}
{{- end -}}
{{- end -}}
{{- $chartLabels := list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "helm.sh/chart" "fabriccap.dev/shard" -}}
{{- $userLabels := dict "podLabels" .Values.podLabels "dashboard.labels" .Values.dashboard.labels "serviceMonitor.additionalLabels" .Values.serviceMonitor.additionalLabels "serviceMonitor.labels" .Values.serviceMonitor.labels "prometheusRule.additionalLabels" .Values.prometheusRule.additionalLabels "prometheusRule.labels" .Values.prometheusRule.labels -}}
{{- range $value, $labels := $userLabels -}}
{{- range $key := $chartLabels -}}
{{- if hasKey ($labels | default (dict)) $key -}}
{{- fail (printf "%s: %s is the chart's own label; give another key" $value $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.prometheusRelease -}}
{{- range $value := list "serviceMonitor" "prometheusRule" -}}
{{- $settings := get $.Values $value -}}
{{- if or (hasKey ($settings.additionalLabels | default (dict)) "release") (hasKey ($settings.labels | default (dict)) "release") -}}
{{- fail (printf "%s.additionalLabels.release: the release label is prometheusRelease's (%s); set prometheusRelease instead" $value $.Values.prometheusRelease) -}}
{{- end -}}
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

{{/*
A probe of `path` on the health port, from a probe value (`probe`) without its `enabled`:
/healthz for startup and liveness, /readyz (healthy, and the cluster listed) for readiness.
*/}}
{{- define "fabriccap.probe" -}}
httpGet:
  path: {{ .path }}
  port: health
{{ omit .probe "enabled" | toYaml }}
{{- end -}}

{{/*
The largest sharding.shards: core/shard.py's MAX_SHARDS, which the values schema enforces too
(tests/repo/test_chart.py checks all three agree). The leader-election Role names every
shard's Lease under every count up to it.
*/}}
{{- define "fabriccap.maxShards" -}}64{{- end }}
