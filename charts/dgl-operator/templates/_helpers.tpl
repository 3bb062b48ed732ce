{{/*
Named templates of the dgl-operator chart. Other templates rely on these exact names:
dgl-operator.name, dgl-operator.fullname, dgl-operator.labels, dgl-operator.selectorLabels,
dgl-operator.serviceAccountName.
*/}}

{{/* The chart name (nameOverride), a DNS label. */}}
{{- define "dgl-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object name prefix: fullnameOverride, else <release>-<name> (just <release> when it
already contains the name), at most 63 characters. */}}
{{- define "dgl-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* <chart>-<version> for the helm.sh/chart label. */}}
{{- define "dgl-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Renders a map as "key: quoted value" lines, sorted by key (label values must be strings). */}}
{{- define "dgl-operator.renderLabels" -}}
{{- range $k, $v := . }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end }}

{{/* The labels the Deployment selects its pods by. */}}
{{- define "dgl-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dgl-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The standard labels plus commonLabels (which never replace the standard ones), as JSON:
use it with fromJson (a YAML round trip would turn label values such as "y" or "on" into
booleans). */}}
{{- define "dgl-operator.labelsDict" -}}
{{- $labels := dict
  "helm.sh/chart" (include "dgl-operator.chart" .)
  "app.kubernetes.io/name" (include "dgl-operator.name" .)
  "app.kubernetes.io/instance" .Release.Name
  "app.kubernetes.io/version" (.Chart.AppVersion | toString)
  "app.kubernetes.io/managed-by" .Release.Service
  "app.kubernetes.io/part-of" "dgl-operator" -}}
{{- toJson (merge $labels (.Values.commonLabels | default dict)) }}
{{- end }}

{{/* Labels of every object: app.kubernetes.io/*, helm.sh/chart and commonLabels. */}}
{{- define "dgl-operator.labels" -}}
{{- include "dgl-operator.renderLabels" (include "dgl-operator.labelsDict" . | fromJson) | trim }}
{{- end }}

{{/* Labels of the operator's pods: the labels above plus podLabels (which never replace them). */}}
{{- define "dgl-operator.podLabels" -}}
{{- $labels := include "dgl-operator.labelsDict" . | fromJson }}
{{- include "dgl-operator.renderLabels" (merge $labels (.Values.podLabels | default dict)) | trim }}
{{- end }}

{{/* The operator's ServiceAccount. */}}
{{- define "dgl-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dgl-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Name of the metrics Service (a DNS-1035 label: at most 63 characters). */}}
{{- define "dgl-operator.metricsCertSecret" -}}
{{- .Values.metrics.certSecret | default (printf "%s-metrics-cert" (include "dgl-operator.fullname" . | trunc 50 | trimSuffix "-")) }}
{{- end }}

{{- define "dgl-operator.metricsServiceName" -}}
{{- printf "%s-metrics" (include "dgl-operator.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/* Name of the Role and RoleBinding for the leader-election Lease. */}}
{{- define "dgl-operator.leaderElectionRoleName" -}}
{{- printf "%s-leader-election" (include "dgl-operator.fullname" .) }}
{{- end }}

{{/* "true" when leader election is on: more than one replica, or leaderElection.force. */}}
{{- define "dgl-operator.leaderElection" -}}
{{- if or .Values.leaderElection.force (gt (int .Values.replicas) 1) }}true{{ end }}
{{- end }}

{{/* Image reference; call with (dict "image" .Values.x.image "root" $). */}}
{{- define "dgl-operator.image" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/* The kubectl-download SHA-256 as the operator passes it on (lowercase hex, no "sha256:"). */}}
{{- define "dgl-operator.kubectlSha256" -}}
{{- .Values.kubectlDownload.sha256 | toString | trim | lower | trimPrefix "sha256:" }}
{{- end }}

{{/* Combinations of values the schema cannot check; fails rendering with the reason. */}}
{{- define "dgl-operator.validateValues" -}}
{{- $url := .Values.kubectlDownload.url | toString | trim }}
{{- $sha := include "dgl-operator.kubectlSha256" . }}
{{- if and $url (not $sha) }}
{{- fail "kubectlDownload.url is set but kubectlDownload.sha256 is not: the kubectl-download init container refuses an unverified download. Set kubectlDownload.sha256 to the SHA-256 of the kubectl binary at that URL (e.g. the content of <url>.sha256 on dl.k8s.io)." }}
{{- end }}
{{- if and $sha (not $url) }}
{{- fail "kubectlDownload.sha256 is set but kubectlDownload.url is not: set both (download and verify kubectl) or neither (copy the kubectl in the kubectl-download image)." }}
{{- end }}
{{- if and $url (not (regexMatch "^https?://[^/?#\\s]+" $url)) }}
{{- fail (printf "kubectlDownload.url must be an http:// or https:// URL, got %q" $url) }}
{{- end }}
{{- if and $sha (not (regexMatch "^[0-9a-f]{64}$" $sha)) }}
{{- fail (printf "kubectlDownload.sha256 must be 64 hexadecimal digits (a SHA-256), got %q" (.Values.kubectlDownload.sha256 | toString)) }}
{{- end }}
{{- if ge (float64 .Values.leaderElection.renewDeadline) (float64 .Values.leaderElection.leaseDuration) }}
{{- fail "leaderElection.renewDeadline must be shorter than leaderElection.leaseDuration" }}
{{- end }}
{{- if eq (int .Values.metrics.port) (int .Values.health.port) }}
{{- fail "metrics.port and health.port must differ" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled (a ServiceMonitor scrapes through the Service); use metrics.podMonitor without the Service" }}
{{- end }}
{{- if and .Values.kueueManageJobsWithoutQueueName (not .Values.kueue) }}
{{- fail "kueueManageJobsWithoutQueueName needs kueue: true (the queue is Kueue's; without Kueue no DGLJob could run)" }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) .Values.rbac.create (not .Values.serviceAccount.name) }}
{{- fail "rbac.create with serviceAccount.create=false needs serviceAccount.name (the chart will not grant the operator's permissions to the namespace's default ServiceAccount)" }}
{{- end }}
{{- end }}
